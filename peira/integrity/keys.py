"""Secret keys and locks: reading a key safely, and the SHA-256 / HMAC lock of a payload.

A key is read from a file or an environment variable, must be at least
:data:`MIN_KEY_BYTES` bytes, and is never written, logged or put in a message.
``lock`` = hex SHA-256 of the canonical JSON of a payload, or with a secret
key hex HMAC-SHA256(key, canonical JSON) (docs/spec/artifacts.md#the-lock).
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..canonical import canonical_json
from ..errors import DataFileError, KeyMaterialError

__all__ = ["MIN_KEY_BYTES", "SEAL_KEY_ENV", "KeyMaterialError", "compute_lock", "load_key"]

PathLike = str | os.PathLike[str]

SEAL_KEY_ENV = "PEIRA_SEAL_KEY"
MIN_KEY_BYTES = 16


def _strip_newline(data: bytes) -> bytes:
    if data.endswith(b"\r\n"):
        return data[:-2]
    if data.endswith(b"\n"):
        return data[:-1]
    return data


def load_key(
    key_file: PathLike | None = None,
    *,
    env_var: str = SEAL_KEY_ENV,
    required: bool = False,
    purpose: str = "seal",
) -> bytes | None:
    """Read a secret key from a file, or else from an environment variable.

    Parameters
    ----------
    key_file
        A file whose bytes are the key (one trailing newline is stripped).
    env_var
        Environment variable consulted when ``key_file`` is None (its value,
        UTF-8 encoded, one trailing newline stripped).
    required
        Raise when no key is configured (else return None).
    purpose
        Word used in messages (``"seal"``, ``"holdout"``).

    Returns
    -------
    bytes or None

    Raises
    ------
    KeyMaterialError
        No key (when required), an empty variable, or a key shorter than
        :data:`MIN_KEY_BYTES` bytes. Messages name the source and the length,
        never the key.
    DataFileError
        The key file does not exist or cannot be read.
    """
    if key_file is not None:
        p = Path(key_file)
        try:
            data = p.read_bytes()
        except FileNotFoundError as exc:
            raise DataFileError(f"{p}: {purpose} key file not found") from exc
        except OSError as exc:
            raise DataFileError(
                f"{p}: cannot read the {purpose} key file ({type(exc).__name__})"
            ) from exc
        source = f"{p}"
    else:
        value = os.environ.get(env_var)
        if value is None:
            if required:
                raise KeyMaterialError(
                    f"no {purpose} key: pass --key-file FILE or set the environment "
                    f"variable {env_var}"
                )
            return None
        data = value.encode("utf-8")
        source = f"${env_var}"
    key = _strip_newline(data)
    if len(key) < MIN_KEY_BYTES:
        raise KeyMaterialError(
            f"{source}: the {purpose} key is {len(key)} bytes; at least {MIN_KEY_BYTES} "
            "bytes are required (use e.g. 32 random bytes)"
        )
    return key


def compute_lock(payload: Mapping[str, Any], key: bytes | None = None) -> str:
    """The lock of a payload: hex SHA-256, or with ``key`` hex HMAC-SHA256, of its canonical JSON.

    Examples
    --------
    >>> compute_lock({"a": 1})[:16]
    '015abd7f5cc57a2d'
    """
    data = canonical_json(payload)
    if key is None:
        return hashlib.sha256(data).hexdigest()
    return hmac.new(key, data, hashlib.sha256).hexdigest()
