"""Peira: score adversarial-robustness benchmarks of decision models.

The flat API (:mod:`peira.api`) — paths or frames in, polars frames out::

    import peira

    d = peira.demo_dir()
    log = d / "responses.parquet"
    peira.score(log, d, by="family")  # every metric with its interval
    peira.leaderboard(log, d)  # ranked runs
    peira.compare(log, d, runs=["m01-robust", "m08-hill-climber"])

Names are loaded on first use (PEP 562), so ``import peira`` is cheap: polars,
pandera and scipy load when a function runs, not before.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time __getattr__ loads these
    from ._version import __version__
    from .api import (
        agreement,
        compare,
        diff,
        flips,
        gate,
        leaderboard,
        pairs,
        plan,
        read_log,
        rescore,
        score,
        tables,
        validate,
    )
    from .errors import (
        DataFileError,
        InputFormatError,
        MissingArmsError,
        PeiraError,
        PeiraKeyError,
        PeiraTypeError,
        PeiraValueError,
        PeiraWarning,
        UnknownNameError,
        ValidationError,
    )
    from .io import (
        Dataset,
        demo_dir,
        read_dataset,
        read_responses,
        scan_responses,
        write_dataset,
        write_parquet,
    )

__all__ = [
    "DataFileError",
    "Dataset",
    "InputFormatError",
    "MissingArmsError",
    "PeiraError",
    "PeiraKeyError",
    "PeiraTypeError",
    "PeiraValueError",
    "PeiraWarning",
    "UnknownNameError",
    "ValidationError",
    "__version__",
    "agreement",
    "compare",
    "demo_dir",
    "diff",
    "flips",
    "gate",
    "leaderboard",
    "pairs",
    "plan",
    "read_dataset",
    "read_log",
    "read_responses",
    "rescore",
    "scan_responses",
    "score",
    "tables",
    "validate",
    "write_dataset",
    "write_parquet",
]

#: Public name → the module that defines it.
_WHERE = {
    "__version__": "._version",
    **dict.fromkeys(
        (
            "agreement",
            "compare",
            "diff",
            "flips",
            "gate",
            "leaderboard",
            "pairs",
            "plan",
            "read_log",
            "rescore",
            "score",
            "tables",
            "validate",
        ),
        ".api",
    ),
    **dict.fromkeys(
        (
            "DataFileError",
            "InputFormatError",
            "MissingArmsError",
            "PeiraError",
            "PeiraKeyError",
            "PeiraTypeError",
            "PeiraValueError",
            "PeiraWarning",
            "UnknownNameError",
            "ValidationError",
        ),
        ".errors",
    ),
    **dict.fromkeys(
        (
            "Dataset",
            "demo_dir",
            "read_dataset",
            "read_responses",
            "scan_responses",
            "write_dataset",
            "write_parquet",
        ),
        ".io",
    ),
}


#: Subpackages reached as attributes after ``import peira`` (loaded on first use).
_SUBMODULES = ("plot",)


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return import_module(f".{name}", __name__)
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'peira' has no attribute {name!r}")
    value = getattr(import_module(where, __name__), name)
    globals()[name] = value  # cached: __getattr__ runs once per name
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
