"""Peira: score adversarial-robustness benchmarks of decision models."""

from ._version import __version__
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
