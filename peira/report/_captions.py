"""Titles and captions of the report tables, as data.

``CAPTIONS`` maps a table name (:data:`peira.report.tables.TABLES`) to its
one-line title and its description (what the rows and columns are); the
caption adds the split and the bootstrap settings, whose interval sentence
is :data:`INTERVAL_NOTE`.
"""

from __future__ import annotations

__all__ = [
    "BOARD_DIVERGENCE_NOTE",
    "CAPTIONS",
    "FLAG_MARK",
    "INTERVAL_NOTE",
    "UNOBSERVED",
    "flag_note",
    "metric_text",
    "unobserved_note",
    "unobserved_title",
]

CAPTIONS: dict[str, tuple[str, str]] = {
    "leaderboard": (
        "Leaderboard",
        "Runs that pass the ranking gates, ranked by robustness (1 - ASR) with intervals; "
        "a run's rank is 1 + the number of runs that beat it (tied runs share a rank). "
        "Unranked runs follow with the gates they fail.",
    ),
    "asr_by_family": (
        "ASR by attack family",
        "Attack success rate per family (rows) and run (columns); the last row is each "
        "run's overall ASR.",
    ),
    "asr_by_family_ci": (
        "ASR by attack family, with intervals",
        "Attack success rate per family and run with its bootstrap interval and the number "
        "of eligible pairs.",
    ),
    "abstention": (
        "Abstention and abstention denial of service",
        "Abstention rates of each arm, attack-induced abstention flips and abstention DoS "
        "(benign answered, attacked abstained), beside ASR.",
    ),
    "targeted": (
        "Target hits and shift without flip",
        "Targeted ASR (attacked answer = the attacker's target) over eligible targeted "
        "pairs; score shifts of at least delta that did not flip the decision; mean score "
        "shift toward the target (withheld below 30 pairs).",
    ),
    "calibration": (
        "Score calibration per arm",
        "miscalibration: the debiased squared calibration error of the emitted scores "
        "(15 equal-mass bins, Brier units; 0 for a calibrated model up to noise of either "
        "sign), with its cluster-bootstrap interval (the percentile interval moved by the "
        "bootstrap's bias) and p_calibrated, a test of calibration by consistency "
        "resampling (small: more miscalibration than a calibrated model of these scores "
        "would show; rows taken as independent). ece_binned is the binned ECE, biased "
        "upward (a calibrated model scores about 0.12 at 100 answers). Reported only from "
        "100 scored answers, else 'insufficient data'. Brier = mcb - dsc + unc: "
        "miscalibration, discrimination and uncertainty of the CORP decomposition "
        "(isotonic recalibration, no bins; its mcb is biased upward at small n).",
    ),
    "confidence_gate": (
        "Confidence gate",
        "Can a confidence gate catch the attack? AUROC of 1 - attacked confidence as a "
        "detector of flips (0.5 = useless; withheld below 30 pairs or 10 of either class, "
        "the status says why), selective risk at coverage 50/80/90/100% and the area under "
        "the risk-coverage curve (lower is better). The gate sees only flips with an attacked "
        "confidence: flips_seen of the run's eligible flips (abstention and malformed flips "
        "carry none).",
    ),
    "head_to_head": (
        "Head-to-head",
        "Row run against column run on robustness: win, loss or tie (overlapping "
        "intervals are a tie), n/a when either run's robustness is undefined (no eligible "
        "pairs); runs in leaderboard order.",
    ),
    "pairwise": (
        "Pairwise comparisons",
        "Every pair of runs on robustness: estimates, the paired difference a - b with its "
        "interval, bootstrap p-value (Holm-adjusted across every pair of runs) and both "
        "verdicts (a, b, tie, or n/a when either run's robustness is undefined); the paired "
        "verdict is the Holm-adjusted test at the report's level.",
    ),
    "divergence": (
        "Public versus holdout",
        "Aggregates only: each run's holdout ASR with its interval (holdout plan, seed + 1) "
        "and the holdout - public difference from independent cluster bootstraps; flagged "
        "as suspected hill-climbing by a one-sided test that the run does worse on the "
        "holdout, at 5% per run (each run is its own family of tests).",
    ),
    "published": (
        "Published versus Peira",
        "Each figure the source published about a run (and family) beside Peira's estimate "
        "of the same metric on the same run, with its interval and the method it used "
        "(method); published_lo/published_hi is the published estimate +/- z * its standard "
        "error where the source reports one; difference = Peira - published; published_n "
        "the number of items the source's figure rests on, where it says.",
    ),
    "census": (
        "Data census",
        "Cases per split and per family, primitive and severity; scenario clusters, runs "
        "and pairs per split.",
    ),
    "gates": (
        "Ranking gates",
        "Per run: the quantities behind the ranking gates and the gates it fails.",
    ),
}
"""Table name -> (title, description)."""

INTERVAL_NOTE = (
    " interval_method: the interval each row used (bca, percentile: cluster bootstrap; "
    "korn-graubard: design-effect-adjusted Clopper-Pearson, where too few clusters or "
    "events carry the bootstrap); flags: few_clusters = fewer than 30 clusters behind "
    "the row's statistic."
)
"""What a table with intervals says of its ``interval_method`` and ``flags`` columns."""

FLAG_MARK = "\u2020"
"""The mark (a dagger) set after the run id of a run the holdout divergence check flags."""


def flag_note(family: str, level: float) -> str:
    """What a ranking table's caption says of ``holdout_flag`` (flag family ``family``,
    α = 1 − ``level``)."""
    alpha = f"{1 - level:.0%}" if round(100 * (1 - level), 6).is_integer() else f"{1 - level:g}"
    how = (
        f"Holm-adjusted across every run of the board at {alpha}, so an honest board has some "
        f"run flagged with probability at most {alpha}"
        if family == "board"
        else f"at {alpha} per run, each run its own family of tests"
    )
    return (
        f" holdout_flag / {FLAG_MARK}: the holdout divergence check flags the run as suspected "
        "tuning to the public split (its holdout ASR is higher than its public ASR by a "
        f"one-sided test, {how}; the divergence table has the numbers). A flagged run is "
        "never typeset as the winner, even at rank 1: its public rank may not hold on unseen "
        "cases."
    )


BOARD_DIVERGENCE_NOTE = (
    " Flag family board: Holm across every run of the board instead of per run; p_value is "
    "each run's one-sided p-value (the smallest alpha at which its own test would flag it) "
    "and p_holm its Holm adjustment; a run is flagged iff p_holm < alpha."
)
"""What the divergence table's caption adds with ``flag_family="board"``."""


UNOBSERVED = "error rate under attack, benign unobserved"
"""What ASR is on a run whose benign arm is not observed (``arms = "attacked"``)."""


def unobserved_title(title: str, runs: list[str], n_runs: int) -> str:
    """``title`` naming the rate for what it is where the benign arm is unobserved."""
    if not runs:
        return title
    which = "" if len(runs) == n_runs else f", for {len(runs)} of {n_runs} runs"
    return f"{title}: {UNOBSERVED}{which}"


def unobserved_note(runs: list[str], n_runs: int) -> str:
    """The caption sentence of a table or figure that shows ASR (or robustness = 1 - ASR)
    of runs whose benign arm is unobserved; empty when every run observed it."""
    if not runs:
        return ""
    who = "every run" if len(runs) == n_runs else "run(s) " + ", ".join(runs)
    return (
        f"Benign arm unobserved ({who}): the rate shown as ASR (asr; robustness = 1 - asr) "
        f"is the {UNOBSERVED}. Every pair is eligible by declaration, not because its benign "
        "answer was right, so it is not conditional on a right benign answer and not "
        "comparable with the ASR of a run that observed both arms. "
    )


def metric_text(text: str, metric: str) -> str:
    """A caption written for ranking by robustness, for ranking by ``metric``."""
    if metric == "robustness":
        return text
    from ..metrics.gates import metric_den_is_eligible

    if not metric_den_is_eligible(metric):  # undefined for want of other pairs than eligible
        text = text.replace(" (no eligible pairs)", "")
    return text.replace("robustness (1 - ASR)", metric).replace("robustness", metric)
