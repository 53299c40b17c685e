"""The version of Peira: the one place it is written (pyproject.toml reads it from here).

A constant, not ``importlib.metadata.version("peira")``: reading package
metadata costs more than the rest of ``peira --version``.
"""

__all__ = ["__version__"]

__version__ = "0.1.0"
