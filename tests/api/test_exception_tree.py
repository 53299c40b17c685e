"""Where the public exceptions live: peira.errors, each with its exit code, re-exported
from the modules users imported them from."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import peira
import peira.errors as errors

# packages whose exceptions have moved into peira.errors
MOVED = ("peira.run", "peira.seal", "peira.parse", "peira.synth", "peira.integrity")
MODULES = sorted(
    {
        info.name
        for info in pkgutil.walk_packages(peira.__path__, "peira.")
        if info.name.startswith(MOVED)
    }
    | set(MOVED)
    | {"peira.rescoring", "peira.adapters"}
)

# (where users import it from, name, exit code)
REEXPORTS = [
    ("peira.run", "RunError", 2),
    ("peira.run", "ResumeError", 2),
    ("peira.run", "RunInterrupted", 130),
    ("peira.run", "AdapterError", 2),
    ("peira.run", "TransientError", 2),
    ("peira.seal", "KeyMaterialError", 2),
    ("peira.seal", "ArtifactExistsError", 2),
    ("peira.integrity", "KeyMaterialError", 2),
    ("peira.parse", "ParserConfigError", 2),
]


@pytest.mark.parametrize("module", MODULES)
def test_no_exception_class_is_defined_outside_errors(module: str) -> None:
    mod = importlib.import_module(module)
    own = [
        name
        for name, obj in vars(mod).items()
        if inspect.isclass(obj)
        and issubclass(obj, BaseException)
        and obj.__module__ == module
        and not name.startswith("_")
    ]
    assert own == []


@pytest.mark.parametrize(("module", "name", "code"), REEXPORTS)
def test_moved_exceptions_are_re_exported_with_their_exit_code(
    module: str, name: str, code: int
) -> None:
    cls = getattr(importlib.import_module(module), name)
    assert cls is getattr(errors, name)
    assert name in errors.__all__
    assert issubclass(cls, errors.PeiraError)
    assert cls.exit_code == code


def test_exit_codes_follow_the_convention() -> None:
    assert errors.PeiraError.exit_code == 2
    for cls in (errors.ValidationError, errors.MissingArmsError):
        assert cls.exit_code == 1
    assert errors.InputFormatError.exit_code == 2  # an unreadable input (hostile JSON included)
    # the builtins they refine still catch them
    assert issubclass(errors.ParserConfigError, ValueError)
    assert issubclass(errors.KeyMaterialError, ValueError)
    assert issubclass(errors.AdapterError, TypeError)
    assert issubclass(errors.ArtifactExistsError, FileExistsError)
    assert issubclass(errors.RunInterrupted, errors.RunError)
    assert issubclass(errors.ResumeError, RuntimeError)
