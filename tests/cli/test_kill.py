"""Kill tests: SIGTERM and SIGKILL at random points of ``run``, ``tables``, ``publish``,
``seal --force``, ``import cases`` and ``import textattack`` (released results).

After the signal the output is either the previous state or the complete new
one (never missing, never mixed), only hidden litter may be left beside it,
and running the command again cleans that litter and gives what an
uninterrupted run gives (``run``: the same log, ignoring ``latency_ms``).
The default suite kills ``run`` and ``tables`` once each at a random point;
``pytest -m slow`` kills every command eight times with each signal.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _tree(path: Path) -> dict[str, str] | None:
    """Relative path → sha256 of every file under ``path`` (None: it does not exist)."""
    if not path.exists():
        return None
    if path.is_file():
        return {"": hashlib.sha256(path.read_bytes()).hexdigest()}
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }


def _peira(argv: list[str], **kw: object) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "peira", *argv],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        **kw,  # type: ignore[arg-type]
    )


def _complete(argv: list[str]) -> float:
    t0 = time.perf_counter()
    with _peira(argv) as proc:
        _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err.decode()
    return time.perf_counter() - t0


@dataclass
class Scenario:
    """A command, the output it writes, and how to tell its states apart."""

    name: str
    argv: list[str]  # writes ``out``
    out: Path
    previous: Callable[[], None]  # puts the previous state in place (or removes ``out``)
    normalise: Callable[[Path], object] = _tree  # what must equal between runs


def _run_log(path: Path) -> object:
    if not path.exists():
        return None
    log = pl.read_parquet(path).drop("latency_ms")  # wall-clock latency differs run to run
    return log.to_dicts()


def _artifact(path: Path) -> object:
    """A sealed artifact without its creation time and the lock over it."""
    if not path.exists():
        return None
    art = json.loads((path / "artifact.json").read_text())
    for k in ("created_utc", "lock"):
        art.pop(k, None)
    return art, _tree(path / "responses.parquet"), sorted(p.name for p in path.iterdir())


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from peira.synth import generate

    root = tmp_path_factory.mktemp("kill")
    generate(120, 3, seed=5).write(root / "ds")
    code = subprocess.run(
        [sys.executable, "-m", "peira", "export", "cases", str(root / "ds"), "--split", "public",
         "--out", str(root / "cases.jsonl")], env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True, check=False,
    )  # fmt: skip
    assert code.returncode == 0, code.stderr
    lines = (root / "cases.jsonl").read_text().splitlines(keepends=True)
    (root / "few.jsonl").write_text("".join(lines[:10]))
    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "textattack"
    for name in ("bert-mr-greedy.csv.gz", "lstm-mr-greedy.csv.gz"):
        shutil.copy(fixtures / name, root / name)
    return root


def _scenarios(root: Path, work: Path) -> dict[str, Scenario]:
    ds = root / "ds"
    data = ["--dataset", str(ds), "--no-figures"]

    def from_argv(argv: list[str], out: Path) -> Callable[[], None]:
        def put() -> None:
            shutil.rmtree(out, ignore_errors=True) if out.is_dir() else out.unlink(missing_ok=True)
            _complete(argv)

        return put

    def nothing(out: Path) -> Callable[[], None]:
        def put() -> None:
            if out.is_dir():
                shutil.rmtree(out)
            out.unlink(missing_ok=True)
            shutil.rmtree(out.with_name(out.name + ".parts"), ignore_errors=True)

        return put

    tables, pub, art = work / "tables", work / "public", work / "sealed"
    ds_out, log, released = work / "imported", work / "run.parquet", work / "released"
    seal = ["seal", "--dataset", str(ds), "--responses", str(ds / "responses.parquet"),
            "--run", "m01-robust", "--out", str(art), "--force"]  # fmt: skip
    return {
        "tables": Scenario(
            "tables", ["tables", *data, "--resamples", "400", "--out", str(tables)], tables,
            from_argv(["tables", *data, "--resamples", "50", "--out", str(tables)], tables),
        ),
        "publish": Scenario(
            "publish", ["publish", *data, "--resamples", "400", "--out", str(pub)], pub,
            from_argv(["publish", *data, "--resamples", "50", "--out", str(pub)], pub),
        ),
        "seal --force": Scenario(
            "seal --force", [*seal, "--resamples", "3000"], art,
            from_argv([*seal, "--resamples", "50"], art), _artifact,
        ),
        "import cases": Scenario(
            "import cases", ["import", "cases", str(root / "cases.jsonl"), "--out", str(ds_out)],
            ds_out, from_argv(["import", "cases", str(root / "few.jsonl"), "--out", str(ds_out)],
                              ds_out),
        ),
        "import textattack": Scenario(
            "import textattack", ["import", "textattack", str(root / "bert-mr-greedy.csv.gz"),
                                  "--out", str(released), "--force"],
            released, from_argv(["import", "textattack", str(root / "lstm-mr-greedy.csv.gz"),
                                 "--out", str(released), "--force"], released),
        ),
        "run": Scenario(
            "run", ["run", "--adapter", "tests.fuzz_adapters:Slow", "--adapter-arg",
                    "delay=0.005", "--dataset", str(ds), "--out", str(log), "--samples", "2",
                    "--concurrency", "2", "--checkpoint-seconds", "0.1", "--no-progress"],
            log, nothing(log), _run_log,
        ),
    }  # fmt: skip


def _litter(out: Path) -> list[str]:
    """Entries beside ``out`` other than ``out`` itself (and a run's checkpoints)."""
    keep = {out.name, out.name + ".parts"}
    return sorted(p.name for p in out.parent.iterdir() if p.name not in keep)


def _kill_once(sc: Scenario, sig: signal.Signals, delay: float) -> tuple[int | None, str]:
    with _peira(sc.argv) as proc:
        try:
            proc.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            proc.send_signal(sig)
        _, err = proc.communicate(timeout=600)
    return proc.returncode, err.decode(errors="replace")


def _trials(
    bench: Path, tmp_path: Path, name: str, plan: list[tuple[signal.Signals, float]]
) -> list[str]:
    """Kill ``name`` at each (signal, fraction of its duration); return what each left."""
    work = tmp_path / "work"
    work.mkdir()
    sc = _scenarios(bench, work)[name]
    # the complete new state, and how long the command takes
    sc.previous()
    duration = _complete(sc.argv)
    new = sc.normalise(sc.out)
    assert new is not None
    seen = []
    for sig, fraction in plan:
        sc.previous()
        before = sc.normalise(sc.out)
        assert before != new
        code, err = _kill_once(sc, sig, fraction * duration)
        after = sc.normalise(sc.out)
        state = "previous" if after == before else "new" if after == new else "OTHER"
        assert state != "OTHER", f"{name}: {sig.name} at {fraction:.2f}: mixed output\n{err}"
        assert "Traceback" not in err, err
        if sig == signal.SIGTERM:
            # 143 once the command handles signals, -15 before (Python start-up), 0 when done
            assert code in (143, -signal.SIGTERM, 0), (code, err)
            if code == 143:
                assert "terminated (SIGTERM)" in err, err
        litter = [x for x in _litter(sc.out) if not x.startswith(".")]
        assert litter == [], f"visible litter after {sig.name}: {litter}"
        # running again cleans the litter and gives the uninterrupted result
        _complete(sc.argv)
        assert sc.normalise(sc.out) == new, f"{name}: rerun after {sig.name} differs"
        assert _litter(sc.out) == [], f"litter left after the rerun: {_litter(sc.out)}"
        if name == "run":
            assert not sc.out.with_name(sc.out.name + ".parts").exists()
        seen.append(f"{sig.name}@{fraction:.2f}:{state}:{code}")
    return seen


NAMES = ["run", "tables", "publish", "seal --force", "import cases", "import textattack"]


@pytest.mark.parametrize(
    ("name", "sig"), [("run", signal.SIGKILL), ("tables", signal.SIGTERM)], ids=["run", "tables"]
)
def test_killed_at_a_random_point(
    bench: Path, tmp_path: Path, name: str, sig: signal.Signals
) -> None:
    rng = random.Random(f"kill-{name}")
    seen = _trials(bench, tmp_path, name, [(sig, rng.uniform(0.4, 1.0))])
    assert len(seen) == 1


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["TERM", "KILL"])
def test_killed_at_many_points(bench: Path, tmp_path: Path, name: str, sig: signal.Signals) -> None:
    rng = random.Random(f"kill-many-{name}-{sig.name}")
    plan = [(sig, rng.uniform(0.5, 1.1)) for _ in range(8)]  # start-up is the first half
    seen = _trials(bench, tmp_path, name, plan)
    print(name, sig.name, seen)


def test_sigterm_stops_a_background_run_of_a_script(bench: Path, tmp_path: Path) -> None:
    """A background job of a script inherits SIGINT ignored; SIGTERM (and SIGINT) still stop it."""
    out, hold = tmp_path / "run.parquet", tmp_path / "release"
    # the calls wait after the fifth of each process until released: always stopped mid-run
    argv = ["run", "--adapter", "tests.fuzz_adapters:Held", "--adapter-arg", f"hold={hold}",
            "--dataset", str(bench / "ds"), "--out", str(out), "--concurrency", "1",
            "--checkpoint-seconds", "0.1", "--no-progress"]  # fmt: skip
    parts = out.with_name(out.name + ".parts")
    for sig, code in ((signal.SIGTERM, 143), (signal.SIGINT, 130)):

        def ignore_sigint() -> None:  # what `cmd &` in a non-interactive shell does
            signal.signal(signal.SIGINT, signal.SIG_IGN)

        done = len(list(parts.glob("part-*.parquet")))
        with _peira(argv, preexec_fn=ignore_sigint) as proc:
            deadline = time.monotonic() + 120
            while len(list(parts.glob("part-*.parquet"))) <= done and time.monotonic() < deadline:
                assert proc.poll() is None, proc.communicate()[1].decode()
                time.sleep(0.02)
            proc.send_signal(sig)
            _, err = proc.communicate(timeout=120)
        assert proc.returncode == code, err.decode()
        assert b"resume" in err
        assert not out.exists() and any(parts.glob("part-*.parquet"))
    hold.touch()
    _complete(argv)  # resumes
    assert pl.read_parquet(out).height == pl.read_parquet(bench / "ds" / "variants.parquet").height


def test_a_second_run_on_the_same_output_is_refused(bench: Path, tmp_path: Path) -> None:
    """Two `peira run` on one --out: the second refuses before any call; the first finishes.

    The first run's calls wait after the fifth (``Held``) until the test releases
    them, so the second always meets a run in progress."""
    out, hold = tmp_path / "run.parquet", tmp_path / "release"
    argv = ["run", "--adapter", "tests.fuzz_adapters:Held", "--adapter-arg", f"hold={hold}",
            "--dataset", str(bench / "ds"), "--out", str(out), "--concurrency", "1",
            "--checkpoint-seconds", "0.1", "--no-progress"]  # fmt: skip
    parts = out.with_name(out.name + ".parts")
    reached = Path(f"{hold}.reached")
    with _peira(argv) as first:
        deadline = time.monotonic() + 120
        while not (reached.exists() and any(parts.glob("part-*.parquet"))):
            assert first.poll() is None, first.communicate()[1].decode()
            assert time.monotonic() < deadline, "the first run never reached its hold"
            time.sleep(0.02)
        n_parts = len(list(parts.glob("part-*.parquet")))
        second = subprocess.run(
            [sys.executable, "-m", "peira", *argv],
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert second.returncode == 2, second.stderr
        assert f"another peira process is writing this output (pid {first.pid})" in second.stderr
        assert len(second.stderr.strip().splitlines()) == 1
        assert first.poll() is None  # the first one was not disturbed
        assert len(list(parts.glob("part-*.parquet"))) >= n_parts
        hold.touch()  # release the first run
    _, err = first.communicate(timeout=600)
    assert first.returncode == 0, err.decode()
    log = pl.read_parquet(out)
    assert log.height == pl.read_parquet(bench / "ds" / "variants.parquet").height
    assert log.select("case_id", "arm").is_unique().all()


def test_an_interrupt_inside_exec_code_still_exits_with_the_commands_code(tmp_path: Path) -> None:
    """CPython marks a KeyboardInterrupt that escaped ``exec(<string>)`` (a dataclass
    being built when the signal arrives) as unhandled and, under ``python -m``, kills
    itself with SIGINT at exit; the guard handles the interrupt, so the exit code stays
    130 (143 for SIGTERM), not -2."""
    (tmp_path / "interrupted_in_exec.py").write_text(
        "import argparse\n"
        "from peira.cli._errors import guard\n"
        "def command(args):\n"
        "    exec('raise KeyboardInterrupt')\n"
        "raise SystemExit(guard(command, argparse.Namespace(command='x')))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "interrupted_in_exec"],
        env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 130, (proc.returncode, proc.stderr)
    assert proc.stderr.strip() == "peira x: interrupted"


@pytest.mark.parametrize("command", ["tables", "publish", "seal"])
def test_a_second_writer_of_the_same_output_is_refused_while_the_first_works(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The writer lock is held from the output check to the command's end, not only
    while files are swapped in: a second command meets it whenever it starts."""
    import peira
    from peira.cli import main

    demo = peira.demo_dir()
    out = tmp_path / "out"
    data = ["--dataset", str(demo), "--responses", str(demo / "responses.parquet")]
    argv = {  # tables and publish without figures still compute for seconds (10,000 resamples)
        "tables": ["tables", *data, "--no-figures", "--out", str(out)],
        "publish": ["publish", *data, "--no-figures", "--out", str(out)],
        "seal": ["seal", *data, "--run", "m01-robust", "--out", str(out)],
    }[command]
    with _peira(argv) as first:
        deadline = time.monotonic() + 120
        while not any(tmp_path.glob(".out.*.peira-lock")):
            assert first.poll() is None, first.communicate()[1].decode()
            assert time.monotonic() < deadline, "the first command never took its lock"
            time.sleep(0.005)
        assert main(argv) == 2  # the first is still at work (it computes for seconds)
        said = capsys.readouterr().err.strip()
        assert said.endswith(
            f"{out}: another peira process is writing this output (pid {first.pid}); wait "
            "for it to finish, or choose another output"
        )
        assert len(said.splitlines()) == 1
        _, err = first.communicate(timeout=600)
    assert first.returncode == 0, err.decode()
    assert out.is_dir() and not any(tmp_path.glob(".out.*.peira-lock"))
