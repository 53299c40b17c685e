"""Fresh interpreters for the import-cost checks, started once per test session.

A check of what ``import peira`` (or one command) loads needs a process in which
nothing was imported before. Starting ``python -c CODE`` for each such check costs
an interpreter start every time; instead one server interpreter starts, imports
nothing but ``os``, ``sys``, ``json`` and ``time``, and forks a child for each
check. The child starts from the server's bare ``sys.modules``, runs the code as
``python -c CODE ARGV...`` would (``__name__ == "__main__"``, ``sys.argv``, an
uncaught exception prints its traceback and exits with 1, ``sys.exit`` sets the
code, interpreter shutdown runs ``atexit`` and joins threads) and writes its
output to files the caller reads.

:func:`fresh_python` is the session fixture (``tests/conftest.py``); it returns a
:class:`FreshPython` whose :meth:`~FreshPython.run` returns a
:class:`subprocess.CompletedProcess`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

_SERVER = r"""
import json, os, sys, time

def child(req):
    os.setsid()
    fd = os.open(os.devnull, os.O_RDONLY)
    os.dup2(fd, 0)
    for n, path in ((1, req["stdout"]), (2, req["stderr"])):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(fd, n)
        os.close(fd)
    if req["env"] is not None:
        os.environ.clear()
        os.environ.update(req["env"])
    if req["cwd"] is not None:
        os.chdir(req["cwd"])
    if req["warnings_error"]:
        import warnings
        sys.warnoptions.append("error")
        warnings.simplefilter("error")
    sys.argv = ["-c", *req["argv"]]
    main = type(sys)("__main__")
    sys.modules["__main__"] = main
    exec(compile(req["code"], "<string>", "exec"), main.__dict__)
    raise SystemExit(0)

for line in sys.stdin:
    req = json.loads(line)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        sys.stdin = None
        child(req)  # ends the process: SystemExit or an uncaught exception
    deadline = time.monotonic() + req["timeout"]
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.killpg(pid, 9)
            done, status = os.waitpid(pid, 0)
            break
        time.sleep(0.002)
    print(json.dumps(os.waitstatus_to_exitcode(status)), flush=True)
"""


class FreshPython:
    """One server interpreter that forks a fresh child per :meth:`run`."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.n = 0
        self.server = subprocess.Popen(
            [sys.executable, "-c", _SERVER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).resolve().parents[1],
        )

    def run(
        self,
        code: str,
        *argv: str,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        warnings_error: bool = False,
        timeout: float = 300.0,
        check: bool = False,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``code`` as ``python [-W error] -c code *argv`` would, in a fresh child.

        Parameters
        ----------
        code, argv
            The program and its arguments (``sys.argv[1:]``).
        env
            The child's whole environment (default: the server's, which is pytest's).
        cwd
            The child's working folder (default: the repository root).
        warnings_error
            Turn warnings into errors, as ``-W error`` does.
        timeout
            Seconds after which the child is killed (its return code is then -9).
        check
            Raise :class:`subprocess.CalledProcessError` on a non-zero return code.

        Returns
        -------
        subprocess.CompletedProcess
            The return code and the text the child wrote to stdout and stderr.
        """
        self.n += 1
        out, err = self.folder / f"{self.n}.out", self.folder / f"{self.n}.err"
        req = {
            "code": code,
            "argv": list(argv),
            "env": None if env is None else dict(env),
            "cwd": None if cwd is None else str(cwd),
            "warnings_error": warnings_error,
            "timeout": timeout,
            "stdout": str(out),
            "stderr": str(err),
        }
        assert self.server.stdin is not None and self.server.stdout is not None
        self.server.stdin.write(json.dumps(req) + "\n")
        self.server.stdin.flush()
        returncode = json.loads(self.server.stdout.readline())
        done = subprocess.CompletedProcess(
            ["python", "-c", code, *argv], returncode, out.read_text(), err.read_text()
        )
        if check:
            done.check_returncode()
        return done

    def close(self) -> None:
        """End the server (its input closes) and close its pipes."""
        for pipe in (self.server.stdin, self.server.stdout):
            if pipe is not None:
                pipe.close()
        self.server.wait(timeout=30)


@pytest.fixture(scope="session")
def fresh_python() -> Iterator[FreshPython]:
    """The session's :class:`FreshPython` (one interpreter start for every import check)."""
    with tempfile.TemporaryDirectory(prefix="peira-fresh-") as folder:
        fresh = FreshPython(Path(folder))
        try:
            yield fresh
        finally:
            fresh.close()
