"""The installed version of Peira (read from the package metadata)."""

from importlib.metadata import PackageNotFoundError, version

__all__ = ["__version__"]

try:
    __version__ = version("peira")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"
