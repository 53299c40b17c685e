"""The write policy: every output Peira writes goes through here.

Rules (``docs/spec/outputs.md`` states them for users):

- **Never over an input.** An output path that is, or lies inside, an input
  of the same command is refused, ``force`` or not.
- **Never over what Peira did not make.** An existing file is replaced only
  when Peira wrote it (a Parquet file carrying Peira's key-value stamp, an
  HTML report carrying Peira's generator tag) or with ``force``. An existing
  directory is written only when it is empty or carries the writer's own
  marker (``manifest.json`` of ``peira tables``/``publish``, ``artifact.json``
  of ``peira seal``, a Peira-stamped ``cases.parquet`` of a dataset);
  ``force`` does not change that. Inside such a directory, files the writer
  did not make are kept.
- **Whole or not at all.** A file is written to a temporary file beside it
  and renamed over it; a directory is staged in a temporary sibling and
  exchanged with the old one in one ``renameat2(RENAME_EXCHANGE)`` (two
  renames where the system lacks it). A killed writer leaves only hidden
  litter (``.NAME.<hash>.peira-*``), removed — or, after an interrupted
  two-rename swap, restored — by the next write of the same output.
- **Checked before work.** :func:`check_output` finds a bad output path (a
  directory where a file goes, a path under a regular file, an unwritable
  or virtual file system, an output that is not Peira's) before a command
  reads its inputs; a failing write (a full disk, a file-size limit) is an
  :class:`~peira.errors.OutputError` naming the path, never a traceback.
- **One writer per output.** A writer holds an advisory lock
  (``.NAME.<hash>.peira-lock`` beside the output, removed on release) for
  the whole write; a second process writing the same output is refused.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import hashlib
import os
import re
import secrets
import shutil
import signal
import stat
import tempfile
import threading
from collections.abc import Callable, Collection, Iterable, Iterator
from pathlib import Path

from .errors import OutputError, PeiraError

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no advisory locks
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "PARQUET_STAMP",
    "XML_STAMP",
    "DirOwner",
    "atomic_dir",
    "atomic_path",
    "check_output",
    "clean_litter",
    "discard_tree",
    "is_peira_file",
    "output_lock",
    "umask",
]

PathLike = str | os.PathLike[str]

#: Key-value metadata key of every Parquet file Peira writes (value: the writer).
PARQUET_STAMP = "peira:writer"
#: What an HTML report carries in its ``<head>``.
HTML_STAMP = b'<meta name="generator" content="peira'
#: The comment an XML file Peira writes (``peira gate --junit``) opens with.
XML_STAMP = b"<!-- generator: peira"

#: ``owner(directory)`` → the entries (relative file paths) Peira made there, or
#: None when the directory does not carry the writer's marker.
DirOwner = Callable[[Path], Collection[str] | None]

_STAGE, _OLD, _TMP, _LOCK = "peira-stage-", "peira-old-", "peira-tmp-", "peira-lock"
_TRASH = "peira-trash-"  # a tree being removed: never restored, removed by any clean_litter


def umask() -> int:
    """The process's umask (read without changing it for long)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _tag(target: Path) -> str:
    """Hidden name stem of a target's litter: short, and unique to the full name."""
    digest = hashlib.sha256(target.name.encode("utf-8", "surrogateescape")).hexdigest()[:8]
    return f".{target.name[:48]}.{digest}."


# ---------------------------------------------------------------- errors


_IO_ERRNOS = {
    errno.ENOSPC: "no space left on the device",
    errno.EFBIG: "file too large (file-size limit reached)",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.ENAMETOOLONG: "file name too long",
    errno.EIO: "input/output error",
}


def _is_write_failure(exc: BaseException) -> bool:
    if isinstance(exc, PeiraError):
        return False
    if isinstance(exc, OSError):
        return True
    # polars and pyarrow wrap the system error in their own types
    text = str(exc)
    return ("os error" in text or "IO error" in text or "IOError" in text) and any(
        word in text.lower()
        for word in ("no space", "too large", "quota", "read-only", "permission", "os error")
    )


def _write_error(target: Path, exc: BaseException) -> OutputError:
    if isinstance(exc, OSError) and exc.errno in _IO_ERRNOS:
        why = _IO_ERRNOS[exc.errno]
    elif isinstance(exc, OSError):
        why = exc.strerror or str(exc)
    else:  # polars/pyarrow: "... No space left on device (os error 28)"
        found = re.search(r"os error (\d+)", str(exc))
        code = int(found.group(1)) if found else None
        known = _IO_ERRNOS.get(code) if code is not None else None
        why = known or " ".join(str(exc).split())
    return OutputError(f"{target}: cannot write: {why}; nothing was written")


# ---------------------------------------------------------------- ownership


def is_peira_file(path: PathLike) -> bool:
    """Whether ``path`` is a regular file that Peira wrote (Parquet stamp, HTML generator tag
    or XML generator comment)."""
    p = Path(path)
    try:
        if not p.is_file():
            return False
        if p.suffix == ".parquet":
            import pyarrow.parquet as pq

            meta = pq.read_metadata(p).metadata or {}
            return PARQUET_STAMP.encode() in meta
        if p.suffix in (".html", ".htm", ".xml"):
            with open(p, "rb") as fh:
                head = fh.read(4096)
            return (HTML_STAMP if p.suffix != ".xml" else XML_STAMP) in head
    except Exception:  # unreadable or corrupt: not recognisably ours
        return False
    return False


def _is_within(child: Path, parent: Path) -> bool:
    return child == parent or parent in child.parents


def _real(p: Path) -> Path:
    """Absolute path with symlinks resolved as far as the path exists."""
    return Path(os.path.realpath(p))


def _same(a: Path, b: Path) -> bool:
    if _real(a) == _real(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _nearest_existing(p: Path) -> Path:
    q = p.absolute()
    while not q.exists() and not q.is_symlink():
        if q.parent == q:
            break
        q = q.parent
    return q


def _probe_writable(directory: Path, target: Path) -> None:
    """Create and remove a temporary file in ``directory``, or say why it cannot be done."""
    if directory.is_file() or (directory.exists() and not directory.is_dir()):
        raise OutputError(f"{target}: {directory} is a file, not a directory")
    try:
        fd, tmp = tempfile.mkstemp(prefix=_tag(target) + "probe-", dir=directory)
    except OSError as exc:
        why = _IO_ERRNOS.get(exc.errno or 0, exc.strerror or str(exc))
        raise OutputError(f"{target}: cannot write in {directory}: {why}") from exc
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(tmp)


def check_output(
    path: PathLike,
    *,
    kind: str = "file",
    inputs: Iterable[PathLike] = (),
    input_trees: Iterable[PathLike] = (),
    force: bool = False,
    owner: DirOwner | None = None,
    writer: str = "peira",
) -> Path:
    """Check an output path before any work; return it as a :class:`~pathlib.Path`.

    Parameters
    ----------
    path
        The output: a file (``kind="file"``) or a directory (``kind="dir"``).
    inputs
        Files the command reads; the output may be none of them.
    input_trees
        Directories the command reads as a whole (a response-log directory);
        the output may not lie inside one.
    force
        Allow replacing an existing file that Peira did not write.
    owner
        For directories: recognises the writer's marker (see :data:`DirOwner`);
        None accepts only a missing or empty directory.
    writer
        Named in messages (``"peira tables"``).

    Raises
    ------
    OutputError
        The output is an input, sits under a regular file, is a directory
        where a file goes (or the reverse), is not Peira's, or its directory
        cannot be written.
    """
    try:
        return _check_output(
            path, kind=kind, inputs=inputs, input_trees=input_trees, force=force,
            owner=owner, writer=writer,
        )  # fmt: skip
    except OSError as exc:
        if isinstance(exc, OutputError):
            raise
        raise _write_error(Path(os.fspath(path)), exc) from None


def _check_output(
    path: PathLike,
    *,
    kind: str,
    inputs: Iterable[PathLike],
    input_trees: Iterable[PathLike],
    force: bool,
    owner: DirOwner | None,
    writer: str,
) -> Path:
    raw = os.fspath(path)
    if not raw or "\x00" in raw:
        raise OutputError(f"{raw!r}: not a usable output path")
    target = Path(raw)
    if len(os.fsencode(target.name)) > 255:
        raise OutputError(f"{target.name[:40]}…: file name too long (more than 255 bytes)")
    if target.name in ("", ".", ".."):
        raise OutputError(f"{target}: not a usable output path (name a file or directory)")
    real = _real(target)
    for i in inputs:
        ip = Path(i)
        if _same(target, ip) or (kind == "dir" and _is_within(_real(ip), real)):
            raise OutputError(
                f"{target}: is an input of this command ({ip}); write the output elsewhere"
            )
    for t in input_trees:
        tp = _real(Path(t))
        if _is_within(real, tp):
            raise OutputError(
                f"{target}: lies inside the input directory {t}; write the output elsewhere"
            )
    if target.is_symlink() and not target.exists():
        raise OutputError(f"{target}: a dangling symbolic link; remove it or choose another path")
    base = _nearest_existing(target)
    if base != target.absolute() and not base.is_dir():
        raise OutputError(f"{target}: {base} is a file, so nothing can be created under it")
    if target.exists():
        if kind == "file":
            if target.is_dir():
                raise OutputError(f"{target}: is a directory; give a file path for the output")
            if not target.is_file():
                raise OutputError(f"{target}: exists and is not a regular file")
            if not force and not is_peira_file(target):
                raise OutputError(
                    f"{target}: exists and was not written by peira; pass --force to replace "
                    "it, or choose another path"
                )
        else:
            if not target.is_dir():
                raise OutputError(f"{target}: exists and is a file; give a directory path")
            _dir_entries(target, owner, writer)
        _probe_writable(target.parent, target)  # the output is staged beside itself
    else:
        _probe_writable(base, target)
    return target


def _dir_entries(target: Path, owner: DirOwner | None, writer: str) -> set[str]:
    """The entries Peira made in an existing ``target`` (empty: an empty directory)."""
    try:
        with os.scandir(target) as it:
            empty = not any(it)
    except OSError as exc:
        raise OutputError(f"{target}: cannot list the directory: {exc.strerror}") from exc
    if empty:
        return set()
    ours = owner(target) if owner is not None else None
    if ours is None:
        raise OutputError(
            f"{target}: exists and is not an output of {writer}; choose a new or empty "
            "directory (peira replaces only its own output directories, --force or not)"
        )
    return set(ours)


# ---------------------------------------------------------------- locks and litter


_held: dict[str, tuple[int, Path, int]] = {}  # lock path → (fd, path, depth)
_held_guard = threading.Lock()


@contextlib.contextmanager
def output_lock(path: PathLike) -> Iterator[None]:
    """Hold the advisory lock of an output (re-entrant within a process).

    Raises
    ------
    OutputError
        Another process holds it.
    """
    target = Path(path).absolute()
    lock = target.parent / (_tag(target) + _LOCK)
    key = str(lock)
    with _held_guard:
        if key in _held:
            fd, p, depth = _held[key]
            _held[key] = (fd, p, depth + 1)
            reentered = True
        else:
            reentered = False
    if reentered:
        try:
            yield
        finally:
            with _held_guard:
                fd, p, depth = _held[key]
                _held[key] = (fd, p, depth - 1)
        return
    made = _make_parents(target)
    try:
        fd = _acquire(lock, target) if fcntl is not None else -1
    except BaseException:
        _remove_empty(made)
        raise
    with _held_guard:
        _held[key] = (fd, lock, 1)
    try:
        yield
    finally:
        with _held_guard:
            del _held[key]
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.unlink(lock)
            os.close(fd)
        _remove_empty(made)  # parents made for an output that was never written


def _make_parents(target: Path) -> list[Path]:
    """Create the missing parents of ``target``; return them, deepest first."""
    missing = []
    q = target.parent
    while not q.exists() and q.parent != q:
        missing.append(q)
        q = q.parent
    _make_parent(target)
    return missing


def _remove_empty(dirs: list[Path]) -> None:
    for d in dirs:
        try:
            d.rmdir()
        except OSError:
            break  # not empty (the output, or someone's file, is in it)


def _acquire(lock: Path, target: Path) -> int:
    assert fcntl is not None
    while True:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise _write_error(target, exc) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                holder = os.read(fd, 32).decode("ascii", "replace").strip()
            finally:
                os.close(fd)
            who = f" (pid {holder})" if holder.isdigit() else ""
            raise OutputError(
                f"{target}: another peira process is writing this output{who}; wait for it "
                "to finish, or choose another output"
            ) from None
        try:
            now = os.stat(lock)
        except FileNotFoundError:
            now = None
        mine = os.fstat(fd)
        if now is not None and (now.st_ino, now.st_dev) == (mine.st_ino, mine.st_dev):
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            return fd
        os.close(fd)  # the holder removed the file as we opened it: try again


def _litter(target: Path) -> list[Path]:
    stem = _tag(target)
    try:
        names = os.listdir(target.parent)
    except OSError:
        return []
    return [
        target.parent / n
        for n in sorted(names)
        if (n.startswith(stem) and n[len(stem) :].startswith((_STAGE, _OLD, _TMP, "probe-")))
        or (n.startswith(".") and f".{_TRASH}" in n)
    ]


def discard_tree(path: PathLike) -> None:
    """Remove a directory as one step: renamed to hidden trash first, then deleted.

    A kill during the deletion leaves only the trash (removed by the next
    write beside it), never a half-deleted directory under the real name.
    """
    p = Path(path)
    if not p.exists():
        return
    # a fresh name, never created first: another writer's clean_litter in the
    # same directory removes any trash it sees, and must find nothing of ours
    # to remove before the rename
    trash = p.parent / f"{_tag(p)}{_TRASH}{os.getpid()}-{secrets.token_hex(8)}"
    os.rename(p, trash)
    shutil.rmtree(trash, ignore_errors=True)


def _remove(p: Path) -> None:
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            p.unlink()


def clean_litter(path: PathLike) -> list[Path]:
    """Remove what an interrupted write of ``path`` left; restore an output lost mid-swap.

    Call with the output's lock held (:func:`atomic_path` and :func:`atomic_dir`
    do). Returns the removed paths.
    """
    target = Path(path)
    litter = _litter(target)
    olds = [p for p in litter if p.name[len(_tag(target)) :].startswith(_OLD)]
    if olds and not target.exists() and not target.is_symlink():
        newest = max(olds, key=lambda p: p.stat().st_mtime_ns)
        os.rename(newest, target)  # the previous state comes back
        litter.remove(newest)
    for p in litter:
        _remove(p)
    return litter


# ---------------------------------------------------------------- files


def _make_parent(target: Path) -> None:
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError as exc:
        raise OutputError(
            f"{target}: {_nearest_existing(target.parent)} is a file, so nothing can be "
            "created under it"
        ) from exc
    except OSError as exc:
        raise _write_error(target, exc) from exc


def _fsync(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def atomic_path(path: PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` on success.

    The file gets the usual mode (umask applied). A failure — an exception in
    the body, a full disk — removes the temporary file and leaves ``path``
    as it was; write failures become :class:`~peira.errors.OutputError`.
    Holds the output's lock and removes litter of earlier interrupted writes.
    """
    target = Path(path)
    if target.is_dir():
        raise OutputError(f"{target}: is a directory; give a file path for the output")
    with output_lock(target):
        clean_litter(target)
        try:
            fd, name = tempfile.mkstemp(prefix=_tag(target) + _TMP, dir=target.parent)
        except OSError as exc:
            raise _write_error(target, exc) from exc
        os.close(fd)
        tmp = Path(name)
        try:
            os.chmod(tmp, 0o666 & ~umask())  # mkstemp makes 0600; give the usual mode
            yield tmp
            _fsync(tmp)
            os.replace(tmp, target)
        except BaseException as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            if _is_write_failure(exc):
                raise _write_error(target, exc) from exc
            raise


# ---------------------------------------------------------------- directories


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths (Linux ``renameat2``); False where unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    rc = fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), ctypes.c_uint(_RENAME_EXCHANGE))
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _link_or_copy(src: Path, dst: Path) -> None:
    if src.is_symlink():
        os.symlink(os.readlink(src), dst)
        return
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _carry_over(old: Path, stage: Path, ours: Collection[str], force: bool) -> None:
    """Link every entry of ``old`` that Peira did not make into ``stage`` (kept, not copied)."""
    ours = set(ours)
    ancestors = {str(Path(e).parent) for e in ours}
    ancestors |= {str(a) for e in ours for a in Path(e).parents}
    for root, dirs, files in os.walk(old):
        rel_root = Path(root).relative_to(old)
        for d in list(dirs):
            rel = rel_root / d
            src = Path(root) / d
            if src.is_symlink():  # a link to a directory: keep the link itself
                dirs.remove(d)
                files.append(d)
                continue
            if str(rel) not in ancestors and not (stage / rel).exists():
                (stage / rel).mkdir(parents=True, exist_ok=True)
        for f in files:
            rel = rel_root / f
            if str(rel) in ours:
                continue  # replaced, or dropped as stale
            dst = stage / rel
            if dst.exists() or dst.is_symlink():
                if force:
                    continue
                raise OutputError(
                    f"{old / rel}: was not written by peira and would be replaced; move it "
                    "away or pass --force"
                )
            dst.parent.mkdir(parents=True, exist_ok=True)
            _link_or_copy(Path(root) / f, dst)


@contextlib.contextmanager
def _signals_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM until the block ends (main thread; elsewhere a no-op).

    A swap is two steps where ``renameat2`` is missing; a Ctrl-C between them
    would leave no output. The handlers are swapped for one that only notes
    the signal, which is raised again, to the handler the command installed,
    when the block ends. (Blocking the signal in this thread would not do: a
    signal delivered to another thread still runs the Python handler here.
    SIGKILL cannot be held: :func:`clean_litter` restores the old output on
    the next write.)
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    noted: list[int] = []

    def note(signum: int, frame: object) -> None:
        noted.append(signum)

    previous: dict[int, object] = {}
    try:
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, note)
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]
        # SIGTERM first: a command stopped by both says it was terminated
        for signum in sorted(set(noted), key=lambda n: n != signal.SIGTERM):
            signal.raise_signal(signum)


def _swap_in(stage: Path, target: Path) -> None:
    with _signals_deferred():
        if not target.exists():
            os.rename(stage, target)
            return
        if _exchange(stage, target):
            swapped = True
        else:
            swapped = False
            old = Path(tempfile.mkdtemp(prefix=_tag(target) + _OLD, dir=target.parent))
            os.rmdir(old)
            os.rename(target, old)
            os.rename(stage, target)  # a kill in between: clean_litter restores ``old``
    shutil.rmtree(stage if swapped else old, ignore_errors=True)  # the previous directory


@contextlib.contextmanager
def atomic_dir(
    path: PathLike,
    *,
    owner: DirOwner | None = None,
    force: bool = False,
    writer: str = "peira",
) -> Iterator[Path]:
    """Yield a staging directory beside ``path``; on success it becomes ``path`` as a whole.

    An existing ``path`` must be empty or carry the writer's marker (``owner``
    returns the entries Peira made there). Those entries are replaced or, if
    not written again, dropped; every other entry is kept (hard-linked into
    the new directory). ``force`` allows replacing a kept entry that the new
    output also writes. The swap is one atomic exchange where the system
    offers it. On failure the staging directory is removed and ``path`` is
    untouched; write failures become :class:`~peira.errors.OutputError`.

    Raises
    ------
    OutputError
        ``path`` is a file, is not the writer's, or cannot be written.
    """
    target = Path(path)
    if target.exists() and not target.is_dir():
        raise OutputError(f"{target}: exists and is a file; give a directory path")
    with output_lock(target):
        clean_litter(target)
        ours = _dir_entries(target, owner, writer) if target.exists() else None
        try:
            stage = Path(tempfile.mkdtemp(prefix=_tag(target) + _STAGE, dir=target.parent))
        except OSError as exc:
            raise _write_error(target, exc) from exc
        try:
            os.chmod(stage, 0o777 & ~umask())
            yield stage
            if ours is not None:
                _carry_over(target, stage, ours, force)
            for root, _, files in os.walk(stage):
                for f in files:
                    p = Path(root) / f
                    if not p.is_symlink() and stat.S_ISREG(p.lstat().st_mode):
                        _fsync(p)
            _swap_in(stage, target)
        except BaseException as exc:
            shutil.rmtree(stage, ignore_errors=True)
            if _is_write_failure(exc):
                raise _write_error(target, exc) from exc
            raise
