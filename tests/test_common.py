"""Properties every registered thing shares, driven by the registries (sklearn's
``test_common.py`` style): each command of the CLI table that takes data or
bootstrap options rejects out-of-range values the same way.
"""

from __future__ import annotations

import argparse

import pytest

from peira.cli import build_parser, main


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> dict:
    """Every leaf command of the CLI table → its parser."""
    out: dict[tuple[str, ...], argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out.update(_commands(sub, (*path, name)))
    if not out and path:
        out[path] = parser
    return out


COMMANDS = _commands(build_parser())
BAD_VALUES = {
    "--resamples": ["0", "-5", "1.5", "many"],
    "--level": ["0", "1", "1.5", "-0.1", "nan", "x"],
    "--seed": ["-1", "0.5", "x"],
    "--delta": ["-0.1", "inf", "nan", "x"],
}
#: The commands that take each option (the coverage assertion below keeps this honest).
TAKES = {
    "--resamples": {"leaderboard", "compare", "score", "tables", "report", "publish", "seal",
                    "holdout divergence"},
    "--level": {"leaderboard", "compare", "score", "tables", "report", "publish",
                "holdout divergence"},
    "--seed": {"leaderboard", "compare", "score", "tables", "report", "publish", "seal",
               "holdout divergence", "synth"},
    "--delta": {"leaderboard", "compare", "score", "tables", "report", "publish", "seal",
                "holdout divergence", "rescore"},
}  # fmt: skip


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings}


def test_the_option_sets_cover_every_command() -> None:
    for option, names in TAKES.items():
        found = {" ".join(path) for path, p in COMMANDS.items() if option in _options(p)}
        assert found == names, option


CASES = [
    (path, option, value)
    for path, p in sorted(COMMANDS.items())
    for option, values in BAD_VALUES.items()
    if option in _options(p)
    for value in values
]


@pytest.mark.parametrize(("path", "option", "value"), CASES)
def test_bad_data_option_exits_2(
    path: tuple[str, ...], option: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main([*path, f"{option}={value}"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"peira {' '.join(path)}: error: argument {option}" in err
