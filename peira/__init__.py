"""Peira: score adversarial-robustness benchmarks of decision models."""

from importlib.metadata import PackageNotFoundError, version

from .errors import (
    DataFileError,
    InputFormatError,
    MissingArmsError,
    PeiraError,
    PeiraWarning,
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

try:
    __version__ = version("peira")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

__all__ = [
    "DataFileError",
    "Dataset",
    "InputFormatError",
    "MissingArmsError",
    "PeiraError",
    "PeiraWarning",
    "ValidationError",
    "__version__",
    "demo_dir",
    "read_dataset",
    "read_responses",
    "scan_responses",
    "write_dataset",
    "write_parquet",
]
