"""``peira holdout keygen``: a new key file, mode 0600, never over an existing file."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from peira.cli import main
from peira.errors import DataFileError, KeyMaterialError
from peira.integrity.keys import MIN_KEY_BYTES, load_key, write_key_file


def test_keygen_writes_a_private_key_that_blind_accepts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = tmp_path / "KEY"
    assert main(["holdout", "keygen", "--out", str(key)]) == 0
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    text = key.read_text()
    assert text.endswith("\n") and len(text) == 65
    int(text, 16)  # hex
    assert load_key(key) == text.strip().encode()
    out = capsys.readouterr().out
    assert text.strip() not in out  # never printed
    assert [p.name for p in tmp_path.iterdir()] == ["KEY"]  # no temporary file left
    blinded = tmp_path / "blinded.parquet"
    assert main(["holdout", "blind", "--dataset", str(_demo()), "--key-file", str(key),
                 "--out", str(blinded)]) == 0  # fmt: skip
    assert blinded.stat().st_size > 0


def test_keys_differ_and_respect_the_size(tmp_path: Path) -> None:
    a = write_key_file(tmp_path / "a")
    b = write_key_file(tmp_path / "b", n_bytes=MIN_KEY_BYTES)
    assert a.read_text() != b.read_text()
    assert len(b.read_text().strip()) == 2 * MIN_KEY_BYTES
    with pytest.raises(KeyMaterialError, match="at least 16"):
        write_key_file(tmp_path / "c", n_bytes=MIN_KEY_BYTES - 1)
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize("kind", ["file", "dir", "symlink"])
def test_keygen_never_overwrites(
    tmp_path: Path, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "KEY"
    if kind == "file":
        target.write_text("someone's key, in use\n")
    elif kind == "dir":
        target.mkdir()
    else:
        os.symlink(tmp_path / "elsewhere", target)
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["holdout", "keygen", "--out", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "never overwritten" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    if kind == "file":
        assert target.read_text() == "someone's key, in use\n"


def test_keygen_into_a_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(DataFileError, match="no such directory"):
        write_key_file(tmp_path / "nope" / "KEY")


def _demo() -> Path:
    from peira.io import demo_dir

    return demo_dir()
