"""Secret keys and locks: reading a key safely, and the SHA-256 / HMAC lock of a payload.

A key is read from a file or an environment variable, must be at least
:data:`MIN_KEY_BYTES` bytes, and is never logged or put in a message;
:func:`write_key_file` makes a new one (``peira holdout keygen``).
``lock`` = hex SHA-256 of the canonical JSON of a payload, or with a secret
key hex HMAC-SHA256(key, canonical JSON) (docs/spec/artifacts.md#the-lock).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..canonical import canonical_json
from ..errors import DataFileError, KeyMaterialError

__all__ = [
    "KEY_BYTES",
    "MIN_KEY_BYTES",
    "SEAL_KEY_ENV",
    "KeyMaterialError",
    "compute_lock",
    "load_key",
    "write_key_file",
]

PathLike = str | os.PathLike[str]

SEAL_KEY_ENV = "PEIRA_SEAL_KEY"
MIN_KEY_BYTES = 16
#: Random bytes in a key made by :func:`write_key_file` (written as hex: 64 characters).
KEY_BYTES = 32


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


def write_key_file(path: PathLike, *, n_bytes: int = KEY_BYTES) -> Path:
    """Write a new secret key to ``path``: ``n_bytes`` random bytes as hex, one line.

    The file is created with mode 0600 (owner read/write only), whole or not
    at all (a temporary file beside it, hard-linked into place), and never
    over an existing file: a key someone already uses is never replaced. The
    same text works as the environment variable (``PEIRA_HOLDOUT_KEY``,
    ``PEIRA_SEAL_KEY``), since :func:`load_key` reads the bytes of the file
    without its final newline.

    Parameters
    ----------
    path
        The key file to create.
    n_bytes
        Random bytes (from :func:`secrets.token_bytes`); at least
        :data:`MIN_KEY_BYTES`.

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    DataFileError
        ``path`` exists (of any kind), or its directory cannot be written.
    KeyMaterialError
        ``n_bytes`` is below :data:`MIN_KEY_BYTES`.

    Examples
    --------
    >>> import os, tempfile
    >>> p = write_key_file(os.path.join(tempfile.mkdtemp(), "KEY"))
    >>> oct(p.stat().st_mode & 0o777), len(load_key(p))
    ('0o600', 64)
    """
    if n_bytes < MIN_KEY_BYTES:
        raise KeyMaterialError(f"a key needs at least {MIN_KEY_BYTES} random bytes, not {n_bytes}")
    target = Path(path)
    if target.exists() or target.is_symlink():
        raise DataFileError(
            f"{target}: exists; a key file is never overwritten (choose another --out, "
            "or remove the old key yourself once nothing needs it)"
        )
    if not target.parent.is_dir():
        raise DataFileError(f"{target.parent}: no such directory")
    text = (secrets.token_bytes(n_bytes).hex() + "\n").encode("ascii")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise DataFileError(f"{target.parent}: cannot write here ({exc.strerror})") from exc
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, target)  # fails if the target appeared meanwhile: never replaces
        except FileExistsError as exc:
            raise DataFileError(f"{target}: exists; a key file is never overwritten") from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return target


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
