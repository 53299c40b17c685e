"""Finding an adapter: ``module:attr`` specs, construction, protocol checks, identity.

:func:`adapter_identity` is what a checkpoint manifest records of an adapter,
so that a resume with another adapter class or configuration is refused.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
from collections.abc import Mapping
from typing import Any

from .protocol import AdapterError

__all__ = [
    "accepts_argument",
    "adapter_identity",
    "adapter_target",
    "check_adapter",
    "load_adapter",
]


def check_adapter(adapter: Any, spec: str = "adapter") -> None:
    """Raise :class:`AdapterError` unless ``adapter`` has str ``name``, ``version`` and ``decide``."""
    wrong = [a for a in ("name", "version") if not isinstance(getattr(adapter, a, None), str)]
    if not callable(getattr(adapter, "decide", None)):
        wrong.append("decide")
    if wrong:
        raise AdapterError(
            f"{spec}: not an adapter: it needs str attributes name and version and a "
            f"decide(request) method (missing or wrong: {', '.join(wrong)})"
        )


def adapter_target(spec: str) -> Any:
    """Import ``module:attr`` and return the object it names (not yet called).

    Raises
    ------
    AdapterError
        Bad spec, import failure or missing attribute.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise AdapterError(
            f"adapter {spec!r}: expected module:Class (e.g. peira.adapters:Constant)"
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise AdapterError(f"adapter {spec!r}: cannot import {module_name!r}: {exc}") from exc
    except SyntaxError as exc:
        where = f"{exc.filename}, line {exc.lineno}" if exc.filename else module_name
        raise AdapterError(
            f"adapter {spec!r}: cannot import {module_name!r}: syntax error in {where}: {exc.msg}"
        ) from exc
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # the module's own code failed while it was imported
        raise AdapterError(
            f"adapter {spec!r}: importing {module_name!r} raised {type(exc).__name__}: {exc}"
        ) from exc
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise AdapterError(f"adapter {spec!r}: {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj


def _is_factory(obj: Any) -> bool:
    return inspect.isclass(obj) or (callable(obj) and not hasattr(obj, "decide"))


def accepts_argument(obj: Any, name: str) -> bool:
    """Whether a class or factory takes the keyword argument ``name``."""
    if not _is_factory(obj):
        return False
    try:
        params = inspect.signature(obj).parameters
    except (TypeError, ValueError):
        return False
    p = params.get(name)
    return p is not None and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)


def load_adapter(spec: str, **kwargs: Any) -> Any:
    """Import ``module:attr`` and return the adapter it names.

    ``attr`` may be a class or factory (called with ``kwargs``) or an adapter
    object (then ``kwargs`` must be empty).

    Raises
    ------
    AdapterError
        Bad spec, import failure, missing attribute, or the object does not
        follow the protocol.
    """
    obj = adapter_target(spec)
    if _is_factory(obj):
        try:
            obj = obj(**kwargs)
        except TypeError as exc:
            raise AdapterError(f"adapter {spec!r}: cannot construct it: {exc}") from exc
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as exc:  # the adapter's own failure to start (a server down)
            raise AdapterError(
                f"adapter {spec!r}: its constructor failed: {type(exc).__name__}: {exc}"
            ) from exc
    elif kwargs:
        raise AdapterError(f"adapter {spec!r} is an object; it takes no arguments")
    check_adapter(obj, spec)
    return obj


def _digest(value: Any) -> str:
    """A short digest of a value's canonical JSON (non-JSON values by ``repr``)."""
    text = json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr
    )
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def adapter_identity(adapter: Any, adapter_args: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What the checkpoint manifest records of an adapter's configuration.

    ``adapter`` is the adapter's ``module:Class``; ``adapter_config`` maps
    each configuration key to a digest of its value's canonical JSON (values
    are not written: adapter arguments may hold credentials). The
    configuration is the adapter's own ``config()`` when it has one (a
    mapping of what determines its answers), else ``adapter_args`` (the
    keyword arguments it was built with, as the CLI passes them), else
    unknown (null: only the class is checked on resume).

    >>> from peira.adapters import Constant
    >>> adapter_identity(Constant(), {"index": 1})["adapter"]
    'peira.adapters:Constant'
    """
    cls = type(adapter)
    config_fn = getattr(adapter, "config", None)
    config: Any = config_fn() if callable(config_fn) else adapter_args
    if config is not None and not isinstance(config, Mapping):
        raise AdapterError(f"{cls.__qualname__}.config() must return a mapping, got {config!r}")
    return {
        "adapter": f"{cls.__module__}:{cls.__qualname__}",
        "adapter_config": None
        if config is None
        else {str(k): _digest(v) for k, v in sorted(config.items(), key=lambda kv: str(kv[0]))},
    }
