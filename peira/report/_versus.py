"""Run versus run: choose two runs in the page, see the pairs one got right and the other wrong.

For every two runs (the first :data:`MAX_VERSUS_RUNS` of the leaderboard
order) the pairs of the report's support that both count on the report's
metric are split by :func:`peira.changes.pair_outcomes`; those with
outcome ``regressed`` (the first run good, the second not) or ``fixed`` (the
reverse) are listed by :func:`peira.changes.changed_cases` with each run's
answer, input and raw output of the arm the metric reads. The rows are
embedded as JSON (every text interned: inputs repeat across runs) and the
page's script shows the chosen two side by side; choosing them the other way
round swaps the columns. ``peira diff A B --cases`` lists the same pairs.
"""

from __future__ import annotations

import html
import itertools
import json
from typing import TYPE_CHECKING, Any

from ..changes import BENIGN_ARM, UNDECOMPOSABLE, changed_cases, pair_outcomes
from ..errors import PeiraError

if TYPE_CHECKING:
    from ._context import ReportContext

__all__ = ["MAX_VERSUS_CASES", "MAX_VERSUS_RUNS", "versus_data", "versus_reason", "versus_section"]

#: Runs offered in the two choosers (the first of the leaderboard order): the page embeds
#: every two of them (``peira diff`` compares any two).
MAX_VERSUS_RUNS = 12
#: At most this many differing pairs are embedded per two runs (the page says how many more).
MAX_VERSUS_CASES = 500

_FIELDS = (
    "case_id",
    "sample",
    "family",
    "expected_decision",
    "answer_a",
    "benign_answer_a",
    "input_a",
    "output_a",
    "answer_b",
    "benign_answer_b",
    "input_b",
    "output_b",
)
"""Per embedded row, after the side (0: the first run right, 1: the second run right)."""


def versus_reason(ctx: ReportContext) -> str | None:
    """Why the run-versus-run view does not apply (None when it does)."""
    if ctx.responses is None or not ctx.has_pairs:
        return "it needs the response log (the local engine)"
    if len(ctx.runs) < 2:
        return "it needs two runs"
    if ctx.metric in UNDECOMPOSABLE:
        return (
            f"metric {ctx.metric!r} splits into no outcome per pair ({UNDECOMPOSABLE[ctx.metric]})"
        )
    return None


def versus_data(ctx: ReportContext, *, max_cases: int = MAX_VERSUS_CASES) -> dict[str, Any]:
    """The embedded data: runs, interned strings and, per two runs ``"i,j"`` (i < j in the
    run list), the pairs one got right and the other wrong with both runs' fields (or
    ``{"error": why}`` where the two split into no outcome per pair)."""
    assert ctx.responses is not None
    runs = ctx.run_order()[:MAX_VERSUS_RUNS]
    own = ctx.config.support == "own"
    strings: dict[str, int] = {}

    def s(v: Any) -> int | None:
        return None if v is None else strings.setdefault(str(v), len(strings))

    by_pair: dict[str, Any] = {}
    for (i, a), (j, b) in itertools.combinations(enumerate(runs), 2):
        try:
            outcomes = pair_outcomes(
                ctx.pairs, a, b, metric=ctx.metric, support_runs=[a, b] if own else None
            )
        except PeiraError as e:  # a metric whose denominator differs between the two
            by_pair[f"{i},{j}"] = {"error": str(e)}
            continue
        cases = changed_cases(
            outcomes, ctx.pairs, ctx.responses, ctx.dataset.variants, a, b, metric=ctx.metric
        )
        rows = [
            [0 if r["outcome"] == "regressed" else 1]
            + [r[f] if f == "sample" else s(r[f]) for f in _FIELDS]
            for r in cases.head(max_cases).iter_rows(named=True)
        ]
        by_pair[f"{i},{j}"] = {
            "rows": rows,
            "total": cases.height,
            "counted": int(outcomes["counted"].sum()),
            "a_right": int((outcomes["outcome"] == "regressed").sum()),
            "b_right": int((outcomes["outcome"] == "fixed").sum()),
        }
    return {
        "runs": runs,
        "fields": ["side", *_FIELDS],
        "strings": list(strings),
        "pairs": by_pair,
        "metric": ctx.metric,
        "arm": "benign" if ctx.metric in BENIGN_ARM else "attacked",
    }


def _json(obj: Any) -> str:
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _select(ident: str, label: str, runs: list[str], chosen: int) -> str:
    opts = "".join(
        f'<option value="{i}"{" selected" if i == chosen else ""}>{html.escape(r)}</option>'
        for i, r in enumerate(runs)
    )
    return f'<label>{html.escape(label)} <select id="{ident}">{opts}</select></label>'


def versus_section(ctx: ReportContext) -> tuple[str, str, str, str]:
    """(anchor, title, caption, body) of the run-versus-run view."""
    data = versus_data(ctx)
    runs = data["runs"]
    m, arm = ctx.metric, data["arm"]
    good = {
        "robustness": "the attack did not flip its answer",
        "asr": "the attack did not flip its answer",
        "benign_accuracy": "its benign answer is right",
    }.get(m, f"its outcome on {m} is the good one")
    more = (
        f" Only the first {MAX_VERSUS_RUNS} runs of the leaderboard are offered; "
        "`peira diff A B --cases` compares any two."
        if len(ctx.runs) > MAX_VERSUS_RUNS
        else ""
    )
    caption = (
        f"Choose two runs: the pairs (case, sample) both count on {m} where one got it right "
        f"({good}) and the other did not, with each run's {arm} input and raw output side by "
        "side; click a row to open it. The same pairs as `peira diff A B --cases` (regressed: "
        f"A right, B wrong; fixed: B right, A wrong), on the report's split and support.{more}"
    )
    body = "".join(
        [
            '<div class="tools">',
            _select("vs-a", "run A", runs, 0),
            _select("vs-b", "run B", runs, 1),
            '<label>show <select id="vs-side"><option value="">both</option>'
            '<option value="0">A right, B wrong</option>'
            '<option value="1">B right, A wrong</option></select></label>',
            '<span class="count" id="vs-count"></span></div>',
            '<div class="scroll"><table id="vs-table"><thead><tr>',
            *[
                f"<th>{html.escape(h)}</th>"
                for h in ("right", "case_id", "sample", "family", "expected", "A", "B")
            ],
            "</tr></thead><tbody></tbody></table></div>",
            '<noscript><p class="empty">The view needs JavaScript; '
            "<code>peira diff A B --cases</code> lists the same pairs.</p></noscript>",
            '<script type="application/json" id="vs-data">',
            _json(data),
            "</script>",
        ]
    )
    return ("versus", "Run versus run", caption, body)
