"""The write policy (peira._writes): inputs, ownership, atomicity, locks, litter, full disks."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import polars as pl
import pytest

import peira._writes as w
from peira.errors import OutputError
from peira.io import (
    atomic_dir,
    atomic_path,
    check_output,
    is_peira_file,
    output_lock,
    write_dataset,
    write_parquet,
)
from tests.builders import case, make_cases, make_variants

GOOD = make_cases(case("c1"), case("c2", scenario_id="s2"), case("c3", scenario_id="s3"))
FRAME = pl.DataFrame({"a": [1, 2, 3]})


def _foreign_parquet(path: Path) -> Path:
    FRAME.write_parquet(path)  # written by polars itself: no Peira stamp
    return path


def _owner_of(name: str) -> w.DirOwner:
    def owner(d: Path) -> set[str] | None:
        return {name, "MARK"} if (d / "MARK").exists() else None

    return owner


# ---------------------------------------------------------------- ownership


def test_peira_parquet_is_stamped_and_foreign_is_not(tmp_path: Path) -> None:
    ours = write_parquet(FRAME, tmp_path / "ours.parquet")
    theirs = _foreign_parquet(tmp_path / "theirs.parquet")
    assert is_peira_file(ours) and not is_peira_file(theirs)
    assert pl.read_parquet(ours).equals(FRAME)  # the stamp is metadata only
    (tmp_path / "junk.parquet").write_bytes(b"PAR1 not really")
    assert not is_peira_file(tmp_path / "junk.parquet")
    assert not is_peira_file(tmp_path / "missing.parquet")


def test_stamped_writes_stay_byte_identical(tmp_path: Path) -> None:
    a = write_parquet(FRAME, tmp_path / "a.parquet").read_bytes()
    b = write_parquet(FRAME, tmp_path / "b.parquet").read_bytes()
    assert a == b


def test_existing_file_needs_force_unless_peira_wrote_it(tmp_path: Path) -> None:
    theirs = _foreign_parquet(tmp_path / "theirs.parquet")
    with pytest.raises(OutputError, match="not written by peira; pass --force"):
        check_output(theirs)
    assert check_output(theirs, force=True) == theirs
    ours = write_parquet(FRAME, tmp_path / "ours.parquet")
    assert check_output(ours) == ours
    notes = tmp_path / "notes.jsonl"
    notes.write_text("{}\n")
    with pytest.raises(OutputError, match="pass --force"):
        check_output(notes)  # a JSONL file can never be recognised: --force only


# ---------------------------------------------------------------- inputs


def test_output_that_is_an_input_is_refused_even_with_force(tmp_path: Path) -> None:
    inp = write_parquet(FRAME, tmp_path / "cases.parquet")
    for alias in (inp, tmp_path / "." / "cases.parquet", tmp_path / "sub" / ".." / "cases.parquet"):
        (tmp_path / "sub").mkdir(exist_ok=True)
        with pytest.raises(OutputError, match="is an input of this command"):
            check_output(alias, inputs=[inp], force=True)
    link = tmp_path / "link.parquet"
    link.symlink_to(inp)
    with pytest.raises(OutputError, match="is an input"):
        check_output(link, inputs=[inp], force=True)
    hard = tmp_path / "hard.parquet"
    os.link(inp, hard)
    with pytest.raises(OutputError, match="is an input"):
        check_output(hard, inputs=[inp], force=True)


def test_output_inside_an_input_tree_or_holding_an_input_is_refused(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    with pytest.raises(OutputError, match="inside the input directory"):
        check_output(logs / "run_id=x" / "part.parquet", input_trees=[logs])
    inp = tmp_path / "ds" / "cases.parquet"
    inp.parent.mkdir()
    write_parquet(FRAME, inp)
    with pytest.raises(OutputError, match="is an input"):
        check_output(tmp_path / "ds", kind="dir", inputs=[inp], owner=_owner_of("x"))


# ---------------------------------------------------------------- bad paths


def test_bad_output_paths_are_one_line_errors(tmp_path: Path) -> None:
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    a_dir = tmp_path / "dir"
    a_dir.mkdir()
    cases = [
        (a_dir, "file", "is a directory; give a file path"),
        (a_file / "out.parquet", "file", "is a file, so nothing can be created under it"),
        (a_file / "deep" / "out.parquet", "file", "is a file, so nothing"),
        (a_file, "dir", "exists and is a file; give a directory path"),
        (Path("/proc/peira-out.parquet"), "file", "cannot write in /proc"),
        (Path("/proc/self/peira/x.parquet"), "file", "cannot write in /proc/self"),
        (Path(""), "file", "not a usable output path"),
    ]
    for path, kind, message in cases:
        with pytest.raises(OutputError, match=message) as info:
            check_output(path, kind=kind)
        assert "\n" not in str(info.value)
    dangling = tmp_path / "dangling.parquet"
    dangling.symlink_to(tmp_path / "nowhere" / "x.parquet")
    with pytest.raises(OutputError, match="dangling symbolic link"):
        check_output(dangling)


def test_missing_parents_are_fine_and_nothing_is_created_by_the_check(tmp_path: Path) -> None:
    out = tmp_path / "a" / "b" / "out.parquet"
    assert check_output(out) == out
    assert list(tmp_path.iterdir()) == []  # the probe leaves nothing


def test_directory_outputs_need_empty_or_own_directories(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert check_output(empty, kind="dir", owner=_owner_of("x")) == empty
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("precious")
    for force in (False, True):
        with pytest.raises(OutputError, match="not an output of peira tables"):
            check_output(mine, kind="dir", owner=_owner_of("x"), force=force, writer="peira tables")
    (mine / "MARK").write_text("")
    assert check_output(mine, kind="dir", owner=_owner_of("x")) == mine


# ---------------------------------------------------------------- atomic files


def test_failed_write_leaves_the_old_file_and_no_litter(tmp_path: Path) -> None:
    out = write_parquet(FRAME, tmp_path / "out.parquet")
    before = out.read_bytes()
    with pytest.raises(RuntimeError, match="boom"), atomic_path(out) as tmp:
        tmp.write_bytes(b"half")
        raise RuntimeError("boom")
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.parquet"]


def _run_limited(code: str, limit: int) -> subprocess.CompletedProcess[str]:
    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        preexec_fn=cap,
        cwd=Path(__file__).resolve().parents[2],
        timeout=120,
    )


def test_file_size_limit_is_a_clean_error_and_nothing_is_left(tmp_path: Path) -> None:
    old = write_parquet(FRAME, tmp_path / "log.parquet")
    before = old.read_bytes()
    proc = _run_limited(
        f"""
        import numpy as np, polars as pl, sys
        from peira.errors import OutputError
        from peira.io import write_parquet
        df = pl.DataFrame({{"x": np.random.default_rng(0).random(200_000)}})
        try:
            write_parquet(df, {str(old)!r})
        except OutputError as exc:
            print(exc)
            sys.exit(2)
        """,
        limit=64 * 1024,
    )
    assert proc.returncode == 2, proc.stderr
    assert "cannot write" in proc.stdout and "file too large" in proc.stdout
    assert "Traceback" not in proc.stderr
    assert old.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log.parquet"]


@pytest.fixture
def tiny_fs(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A 256 KiB tmpfs (skipped where mounting is not allowed)."""
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)],
        capture_output=True,
        check=False,
    )
    if proc.returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def test_full_disk_is_a_clean_error(tiny_fs: Path) -> None:
    import numpy as np

    big = pl.DataFrame({"x": np.random.default_rng(0).random(200_000)})
    old = write_parquet(FRAME, tiny_fs / "log.parquet")
    before = old.read_bytes()
    with pytest.raises(OutputError, match="no space left on the device"):
        write_parquet(big, old)
    assert old.read_bytes() == before
    with pytest.raises(OutputError, match="no space left"), atomic_dir(tiny_fs / "tree") as tmp:
        (tmp / "a.bin").write_bytes(os.urandom(600_000))
    assert sorted(p.name for p in tiny_fs.iterdir()) == ["log.parquet"]


# ---------------------------------------------------------------- atomic directories


def test_directory_swap_keeps_files_peira_did_not_make(tmp_path: Path) -> None:
    out = tmp_path / "out"
    owner = _owner_of("result.txt")
    with atomic_dir(out, owner=owner) as tmp:
        (tmp / "MARK").write_text("")
        (tmp / "result.txt").write_text("v1")
    (out / "notes.txt").write_text("mine")
    (out / "sub").mkdir()
    (out / "sub" / "deep.txt").write_text("deep")
    (out / "emptydir").mkdir()
    ino = (out / "notes.txt").stat().st_ino
    with atomic_dir(out, owner=owner) as tmp:
        (tmp / "MARK").write_text("")
        (tmp / "result.txt").write_text("v2")
    assert (out / "result.txt").read_text() == "v2"
    assert (out / "notes.txt").read_text() == "mine"
    assert (out / "notes.txt").stat().st_ino == ino  # kept (linked), not copied
    assert (out / "sub" / "deep.txt").read_text() == "deep"
    assert (out / "emptydir").is_dir()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_directory_swap_refuses_to_replace_a_foreign_file_without_force(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with atomic_dir(out, owner=_owner_of("result.txt")) as tmp:
        (tmp / "MARK").write_text("")
    (out / "result2.txt").write_text("user's")
    with (
        pytest.raises(OutputError, match=r"result2.txt: was not written by peira"),
        atomic_dir(out, owner=_owner_of("result.txt")) as tmp,
    ):
        (tmp / "result2.txt").write_text("new")
    assert (out / "result2.txt").read_text() == "user's"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    with atomic_dir(out, owner=_owner_of("result.txt"), force=True) as tmp:
        (tmp / "result2.txt").write_text("new")
    assert (out / "result2.txt").read_text() == "new"


def test_two_rename_fallback_and_restoring_an_interrupted_swap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    owner = _owner_of("r.txt")
    with atomic_dir(out, owner=owner) as tmp:
        (tmp / "MARK").write_text("")
        (tmp / "r.txt").write_text("v1")
    monkeypatch.setattr(w, "_exchange", lambda a, b: False)
    with atomic_dir(out, owner=owner) as tmp:
        (tmp / "MARK").write_text("")
        (tmp / "r.txt").write_text("v2")
    assert (out / "r.txt").read_text() == "v2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    # a kill between the two renames: the output is missing, the old tree is litter
    old = tmp_path / (w._tag(out) + "peira-old-x1")
    os.rename(out, old)
    stage = tmp_path / (w._tag(out) + "peira-stage-x2")
    stage.mkdir()
    (stage / "half").write_text("")
    with atomic_path(tmp_path / "other.txt") as t:  # other outputs leave it alone
        t.write_text("")
    assert old.exists()
    removed = w.clean_litter(out)
    assert (out / "r.txt").read_text() == "v2"  # the previous state is back
    assert stage in removed and not stage.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.txt", "out"]


def test_litter_of_a_killed_file_writer_is_removed_by_the_next_write(tmp_path: Path) -> None:
    out = tmp_path / "log.parquet"
    for n in ("peira-tmp-abc", "peira-stage-def"):
        p = tmp_path / (w._tag(out) + n)
        p.mkdir() if "stage" in n else p.write_bytes(b"half")
    (tmp_path / ".log.parquet.something-else").write_text("not ours")
    write_parquet(FRAME, out)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".log.parquet.something-else",
        "log.parquet",
    ]


def test_dataset_is_written_whole_and_keeps_other_files(tmp_path: Path) -> None:
    d = tmp_path / "ds"
    write_dataset(GOOD, make_variants(GOOD), d)
    write_parquet(FRAME, d / "responses.parquet")  # a run's log beside the dataset
    (d / "README.md").write_text("notes")
    bad = GOOD.with_columns(pl.lit("nope").alias("split"))
    before = {p.name: p.read_bytes() for p in d.iterdir()}
    with pytest.raises(Exception, match="split"):
        write_dataset(bad, make_variants(GOOD), d)
    assert {p.name: p.read_bytes() for p in d.iterdir()} == before
    write_dataset(GOOD.head(2), make_variants(GOOD.head(2)), d)
    assert pl.read_parquet(d / "cases.parquet").height == 2
    assert (d / "README.md").read_text() == "notes"
    assert pl.read_parquet(d / "responses.parquet").equals(FRAME)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "cases.parquet").write_bytes(b"user data")
    with pytest.raises(OutputError, match="not an output of"):
        write_dataset(GOOD, make_variants(GOOD), mine, force=True)
    assert (mine / "cases.parquet").read_bytes() == b"user data"


# ---------------------------------------------------------------- locks


def test_a_second_process_writing_the_same_output_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "log.parquet"
    code = f"""
        import sys, time
        from peira.io import output_lock
        with output_lock({str(out)!r}):
            print("locked", flush=True)
            sys.stdin.readline()
    """
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(OutputError, match=rf"another peira process .*pid {holder.pid}"):
            write_parquet(FRAME, out)
        assert not out.exists()
    finally:
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.close()
        holder.wait(timeout=60)
        assert holder.stdout is not None
        holder.stdout.close()
    write_parquet(FRAME, out)  # released: fine now, and the lock file is gone
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log.parquet"]


def test_lock_is_reentrant_within_a_process(tmp_path: Path) -> None:
    out = tmp_path / "log.parquet"
    with output_lock(out), output_lock(out):
        write_parquet(FRAME, out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log.parquet"]


def _peira_cli(argv: list[str], limit: int | None = None) -> subprocess.CompletedProcess[str]:
    def cap() -> None:
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run(
        [sys.executable, "-m", "peira", *argv],
        capture_output=True,
        text=True,
        preexec_fn=cap,
        cwd=Path(__file__).resolve().parents[2],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        timeout=600,
        check=False,
    )


def test_commands_on_a_full_disk_fail_cleanly(tiny_fs: Path, tmp_path: Path) -> None:
    """tables, synth and run writing to a full file system: one line, exit 2, nothing left."""
    from peira.synth import generate

    generate(60, 2, seed=1).write(tmp_path / "ds")
    (tiny_fs / "filler").write_bytes(b"\0" * 240_000)
    ds = str(tmp_path / "ds")
    for argv in (
        ["tables", "--dataset", ds, "--no-figures", "--resamples", "20", "--out",
         str(tiny_fs / "tables")],
        ["synth", "--cases", "3000", "--models", "8", "--out", str(tiny_fs / "bench")],
        ["run", "--adapter", "peira.adapters:Constant", "--dataset", ds, "--out",
         str(tiny_fs / "run.parquet"), "--samples", "20", "--no-progress"],
    ):  # fmt: skip
        proc = _peira_cli(argv)
        assert proc.returncode == 2, (argv[0], proc.stderr)
        assert "no space left on the device" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr
        left = sorted(p.name for p in tiny_fs.iterdir())
        if argv[0] == "run":  # completed calls stay checkpointed for a resume
            left = [n for n in left if n != "run.parquet.parts"]
        assert left == ["filler"], (argv[0], left)


def test_a_file_size_limit_mid_write_is_a_clean_error(tmp_path: Path) -> None:
    from peira.synth import generate

    generate(60, 2, seed=1).write(tmp_path / "ds")
    proc = _peira_cli(
        ["synth", "--cases", "2000", "--models", "6", "--out", str(tmp_path / "big")],
        limit=200_000,
    )
    assert proc.returncode == 2, proc.stderr
    assert "file too large" in proc.stderr and "Traceback" not in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]


# ---------------------------------------------------------------- reading what writers leave


def test_a_partition_never_relabels_a_stored_column(tmp_path: Path) -> None:
    from peira.errors import ValidationError
    from peira.io import read_responses, scan_responses
    from tests.builders import make_responses, pair_rows

    log = make_responses(*pair_rows("c1", "deny", "deny", run_id="m1"))
    good = tmp_path / "good" / "run_id=m1"
    good.mkdir(parents=True)
    log.write_parquet(good / "part-0.parquet")
    assert read_responses(tmp_path / "good")["run_id"].to_list() == ["m1", "m1"]
    assert scan_responses(tmp_path / "good").collect()["run_id"].to_list() == ["m1", "m1"]
    bad = tmp_path / "bad" / "run_id=other"
    bad.mkdir(parents=True)
    log.write_parquet(bad / "part-0.parquet")
    for reader in (read_responses, lambda p: scan_responses(p).collect()):
        with pytest.raises(ValidationError, match="partition_agrees") as info:
            reader(tmp_path / "bad")
        assert "'m1' stored, 'other' in the directory name (2 row(s))" in str(info.value)
    # hive values fill a column the files do not store, typed as the data model says
    bare = tmp_path / "bare" / "run_id=m1"
    bare.mkdir(parents=True)
    log.drop("run_id").write_parquet(bare / "part-0.parquet")
    assert read_responses(tmp_path / "bare")["run_id"].to_list() == ["m1", "m1"]


def test_directory_logs_skip_hidden_files_and_run_checkpoints(tmp_path: Path) -> None:
    from peira.io import read_responses
    from tests.builders import make_responses, pair_rows

    logs = tmp_path / "logs"
    logs.mkdir()
    log = make_responses(*pair_rows("c1", "deny", "deny", run_id="m1"))
    write_parquet(log, logs / "m1.parquet")
    other = make_responses(*pair_rows("c1", "deny", "deny", run_id="m2"))
    parts = logs / "m2.parquet.parts"  # a run in progress (or interrupted) beside the logs
    parts.mkdir()
    (parts / "manifest.json").write_text("{}")
    other.write_parquet(parts / "part-00001.parquet")
    other.write_parquet(logs / (w._tag(logs / "m3.parquet") + "peira-tmp-x"))  # litter
    (logs / ".hidden").mkdir()
    other.write_parquet(logs / ".hidden" / "x.parquet")
    assert read_responses(logs)["run_id"].unique().to_list() == ["m1"]


def test_a_discarded_tree_goes_at_once_and_its_trash_is_cleaned(tmp_path: Path) -> None:
    parts = tmp_path / "log.parquet.parts"
    parts.mkdir()
    (parts / "manifest.json").write_text("{}")
    (parts / "part-00001.parquet").write_bytes(b"x")
    w.discard_tree(parts)
    assert list(tmp_path.iterdir()) == []
    # a kill during the deletion leaves hidden trash, never a half checkpoint under its name
    trash = tmp_path / (w._tag(parts) + "peira-trash-abc")
    trash.mkdir()
    (trash / "part-00002.parquet").write_bytes(b"x")
    write_parquet(FRAME, tmp_path / "log.parquet")  # the next write beside it cleans it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log.parquet"]


def test_signals_wait_for_the_end_of_a_swap() -> None:
    """SIGINT/SIGTERM during a swap are delivered after it, to the handler in place, also
    when the kernel hands the signal to another thread (Python runs the handler here)."""
    import select
    import signal

    from peira._writes import _signals_deferred

    got: list[int] = []

    def record(signum: int, frame: object) -> None:
        got.append(signum)

    r, w = os.pipe()
    os.set_blocking(w, False)
    before_fd = signal.set_wakeup_fd(w)  # the C-level handler writes here when it has run
    before = signal.signal(signal.SIGTERM, record)
    stop = threading.Event()
    helper = threading.Thread(target=stop.wait)
    helper.start()
    done = False
    try:
        with pytest.raises(KeyboardInterrupt), _signals_deferred():
            assert helper.ident is not None
            signal.pthread_kill(helper.ident, signal.SIGINT)
            assert select.select([r], [], [], 60)[0], "the signal never arrived"
            signal.raise_signal(signal.SIGTERM)
            for _ in range(1000):  # Python handlers would have run by now
                pass
            assert got == []
            done = True
        assert done and got == [signal.SIGTERM]
        assert signal.getsignal(signal.SIGTERM) is record
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGTERM, before)
        signal.set_wakeup_fd(before_fd)
        os.close(r)
        os.close(w)
        stop.set()
        helper.join()


def test_a_discard_races_safely_with_another_writers_cleanup(tmp_path: Path) -> None:
    # two runs finishing in one directory: one discards its checkpoint while the
    # other's write cleans litter (which removes any trash it sees)
    errors: list[BaseException] = []
    done = threading.Event()

    def discarder() -> None:
        try:
            for _ in range(500):
                parts = tmp_path / "a.parquet.parts"
                parts.mkdir()
                (parts / "part-00001.parquet").write_bytes(b"x")
                w.discard_tree(parts)
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            done.set()

    def cleaner() -> None:
        while not done.is_set():
            w.clean_litter(tmp_path / "b.parquet")

    threads = [threading.Thread(target=discarder), threading.Thread(target=cleaner)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    assert list(tmp_path.iterdir()) == []
