"""How much data a comparison of two runs' ASR needs (docs/spec/planning.md).

ASR is conditional (flips among eligible pairs), a head-to-head comparison
takes it on the pairs eligible for *both* runs, and the cluster bootstrap
resamples scenarios (docs/spec/comparison.md#paired-asr,
docs/spec/uncertainty.md#the-resampling-unit). A plan for a minimum
detectable ASR difference therefore has to shrink n twice: by eligibility
(only a share e of the pairs is eligible for both runs) and by the
clustering of scenarios (a design effect). The formulas, with
m cases per scenario, s samples per case, ICC the intra-class correlation
of a run's flip indicators among the eligible pairs of one scenario and ρ
the correlation of the two runs' flip indicators on the same pair:

- eligible pairs per scenario K ~ Binomial(m·s, e), so the size-weighted
  cluster size is m̃ = E[K²]/E[K] = 1 + e·(m·s − 1) and the design effect
  (Kish 1965, *Survey Sampling*; for a ratio estimator over clusters of random size)

      deff = 1 + (m̃ − 1)·ICC = 1 + e·(m·s − 1)·ICC;

- the paired difference of flip indicators D = X_A − X_B on a pair eligible
  for both, with p_A = asr + mde and p_B = asr,

      σ_D² = p_A(1 − p_A) + p_B(1 − p_B) − 2ρ·√(p_A(1 − p_A)·p_B(1 − p_B)),

  and the scenario effect shared by the runs in proportion ρ (the
  correlation of X_A and X_B on two pairs of one scenario is ρ·ICC), so D
  has the same intra-class correlation ICC and the same design effect;
- over N eligible pairs, se(d̂) = √(deff·σ_D²/N) and each run's own rate on
  them has se_r = √(deff·p_r(1 − p_r)/N).

**Paired rule** (the Holm-adjusted paired test, docs/spec/comparison.md#head-to-head):
A is named the better run when d̂/se(d̂) exceeds z = Φ⁻¹(1 − α/(2k)),
α = 1 − level, k the Holm family (the first Holm step, which is Bonferroni's:
a safe plan for any place in the family). Power = Φ(mde/se(d̂) − z) and

    N = deff·σ_D²·(z + z_π)² / mde²           (z_π = Φ⁻¹(power)).

**Non-overlap rule** (``rule="ci"``): the two intervals at ``level``
(≈ θ̂_r ± z·se_r, z = Φ⁻¹(1 − α/2)) do not overlap when d̂ exceeds
z·(se_A + se_B), which is more than the paired test's z·se(d̂) (se_A + se_B ≥
√(se_A² + se_B²) ≥ se(d̂) for ρ ≥ 0). Power = Φ((mde − z·(se_A + se_B))/se(d̂)) and

    N = deff·(z·(σ_A + σ_B) + z_π·σ_D)² / mde².

Scenarios needed = ⌈N / (m·s·e)⌉, cases = ⌈scenarios·m⌉.

**0 flips in n**: with no flip among n eligible pairs, the one-sided (1 − α)
Clopper–Pearson upper bound of the ASR is 1 − α^(1/n) (≈ 3/n at α = 0.05,
the rule of three), taken on the effective n = N/deff (Korn & Graubard 1998).

Power is the probability that the rule names the truly better run (the
wrong-direction tail is not counted). ``benchmarks/plan_power.py`` checks the
predictions against Peira's own comparison on simulated runs
(``benchmarks/results/plan_power.md``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Literal

import polars as pl

from .errors import PeiraValueError, UnknownNameError

__all__ = [
    "MAX_PER_UNIT",
    "RULES",
    "Design",
    "PilotEstimate",
    "check_goal",
    "clusters_needed",
    "design_effect",
    "diff_sd",
    "eligible_needed",
    "estimate_design",
    "icc_anova",
    "plan_table",
    "power",
    "with_stated",
    "zero_flip_upper",
]

PlanRule = Literal["paired", "ci"]
#: The largest cases per scenario, and samples per case, a design may state.
MAX_PER_UNIT = 1e6
#: The rules a plan is made for, in the order of its rows.
RULES: tuple[PlanRule, ...] = ("paired", "ci")


def _z(p: float) -> float:
    from scipy.special import ndtri

    return float(ndtri(p))


def _phi(x: float) -> float:
    from scipy.special import ndtr

    return float(ndtr(x))


@dataclass(frozen=True)
class Design:
    """What a plan assumes about the data (docs/spec/planning.md#inputs).

    Attributes
    ----------
    asr
        The better run's ASR on the pairs eligible for both runs (the other's
        is ``asr + mde``).
    eligibility
        The share e of the pairs both runs answered that are eligible for both.
    icc
        The intra-class correlation of a run's flip indicators among the
        eligible pairs of one scenario, in [0, 1).
    cases_per_cluster
        Cases per scenario, m ≥ 1 (1: single-case clusters).
    rho
        The correlation of the two runs' flip indicators on one pair, in [−1, 1].
    samples
        Samples per case, s ≥ 1 (each (case, sample) is one pair).
    source
        What the values were estimated from, or ``"stated"``.
    """

    asr: float
    eligibility: float = 1.0
    icc: float = 0.0
    cases_per_cluster: float = 1.0
    rho: float = 0.0
    samples: float = 1.0
    source: str = "stated"

    def __post_init__(self) -> None:
        checks = (
            ("asr", self.asr, 0.0, 1.0, True, True),
            ("eligibility", self.eligibility, 0.0, 1.0, True, False),
            ("icc", self.icc, 0.0, 1.0, False, True),
            ("rho", self.rho, -1.0, 1.0, False, False),
        )
        for name, value, lo, hi, open_lo, open_hi in checks:
            _check_number(name, value, lo, hi, open_lo=open_lo, open_hi=open_hi)
        for name, value in (
            ("cases_per_cluster", self.cases_per_cluster),
            ("samples", self.samples),
        ):
            _check_number(name, value, 1.0, MAX_PER_UNIT)

    @property
    def pairs_per_cluster(self) -> float:
        """m·s: the (case, sample) pairs of one scenario."""
        return self.cases_per_cluster * self.samples

    @property
    def eligible_per_cluster(self) -> float:
        """m·s·e: the pairs of one scenario eligible for both runs, on average."""
        return self.pairs_per_cluster * self.eligibility


def _check_number(
    name: str,
    value: object,
    lo: float,
    hi: float,
    *,
    open_lo: bool = False,
    open_hi: bool = False,
) -> float:
    """``value`` as a float when it is a finite number in the interval; else one sentence."""
    shown = f"{'(' if open_lo else '['}{lo:g}, {hi:g}{')' if open_hi else ']'}"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PeiraValueError(f"plan: {name} must be a number in {shown}; got {value!r}")
    x = float(value)
    inside = (lo < x if open_lo else lo <= x) and (x < hi if open_hi else x <= hi)
    if math.isnan(x) or not inside or (math.isinf(x) and not math.isinf(hi)):
        raise PeiraValueError(f"plan: {name} must be a number in {shown}; got {value!r}")
    return x


def check_goal(mde: float, target_power: float, level: float, family_size: int) -> None:
    """Refuse a difference outside (0, 1), a power or level outside (0, 1), a family < 1."""
    _check_number("mde", mde, 0.0, 1.0, open_lo=True, open_hi=True)
    _check_number("power", target_power, 0.0, 1.0, open_lo=True, open_hi=True)
    _check_number("level", level, 0.0, 1.0, open_lo=True, open_hi=True)
    if isinstance(family_size, bool) or not isinstance(family_size, int) or family_size < 1:
        raise PeiraValueError(f"plan: family_size must be a whole number ≥ 1; got {family_size!r}")


# ---------------------------------------------------------------- the formulas


def design_effect(
    icc: float, cases_per_cluster: float, samples: float, eligibility: float
) -> float:
    """deff = 1 + e·(m·s − 1)·ICC: the variance inflation of a rate over scenario clusters
    whose m·s pairs are each eligible with probability e (docs/spec/planning.md#design-effect)."""
    return 1.0 + eligibility * (cases_per_cluster * samples - 1.0) * icc


def diff_sd(p_a: float, p_b: float, rho: float) -> float:
    """σ_D: the standard deviation of X_A − X_B, flip indicators of rates p_a, p_b and
    correlation ρ on one pair (docs/spec/planning.md#the-paired-difference)."""
    va, vb = p_a * (1.0 - p_a), p_b * (1.0 - p_b)
    return math.sqrt(max(va + vb - 2.0 * rho * math.sqrt(va * vb), 0.0))


def _rates(design: Design, mde: float) -> tuple[float, float]:
    p_b = design.asr
    p_a = p_b + mde
    if p_a >= 1.0:
        raise PeiraValueError(
            f"plan: asr + mde must be below 1 (the worse run's ASR); got {p_b:g} + {mde:g}"
        )
    return p_a, p_b


def _criticals(rule: str, level: float, family_size: int) -> float:
    alpha = 1.0 - level
    if rule == "paired":
        return _z(1.0 - alpha / (2.0 * family_size))
    if rule == "ci":
        return _z(1.0 - alpha / 2.0)
    raise UnknownNameError("rule", rule, RULES)


def _per_pair(design: Design, mde: float) -> tuple[float, float, float, float]:
    """(deff, σ_D, σ_A, σ_B) of the design at a gap of ``mde``."""
    p_a, p_b = _rates(design, mde)
    deff = design_effect(design.icc, design.cases_per_cluster, design.samples, design.eligibility)
    return (
        deff,
        diff_sd(p_a, p_b, design.rho),
        math.sqrt(p_a * (1 - p_a)),
        math.sqrt(p_b * (1 - p_b)),
    )


def eligible_needed(
    design: Design,
    mde: float,
    *,
    target_power: float = 0.8,
    level: float = 0.95,
    rule: str = "paired",
    family_size: int = 1,
) -> float:
    """N, the pairs eligible for both runs that detect ``mde`` with ``target_power``
    under ``rule`` (the module notes; not rounded)."""
    check_goal(mde, target_power, level, family_size)
    z = _criticals(rule, level, family_size)
    z_pi = _z(target_power)
    deff, sd_d, sd_a, sd_b = _per_pair(design, mde)
    if rule == "paired":
        return deff * sd_d**2 * (z + z_pi) ** 2 / mde**2
    return deff * (z * (sd_a + sd_b) + z_pi * sd_d) ** 2 / mde**2


def clusters_needed(
    design: Design,
    mde: float,
    *,
    target_power: float = 0.8,
    level: float = 0.95,
    rule: str = "paired",
    family_size: int = 1,
) -> int:
    """Scenarios needed: ⌈N / (m·s·e)⌉ (:func:`eligible_needed`), at least 2."""
    n = eligible_needed(
        design, mde, target_power=target_power, level=level, rule=rule, family_size=family_size
    )
    return max(2, math.ceil(n / design.eligible_per_cluster - 1e-9))


def power(
    design: Design,
    mde: float,
    n_clusters: int,
    *,
    level: float = 0.95,
    rule: str = "paired",
    family_size: int = 1,
) -> float:
    """The probability that ``rule`` names the better run of two whose ASRs differ by
    ``mde``, on ``n_clusters`` scenarios of the design (the module notes)."""
    check_goal(mde, 0.5, level, family_size)
    if isinstance(n_clusters, bool) or not isinstance(n_clusters, int) or n_clusters < 1:
        raise PeiraValueError(f"plan: n_clusters must be a whole number ≥ 1; got {n_clusters!r}")
    z = _criticals(rule, level, family_size)
    deff, sd_d, sd_a, sd_b = _per_pair(design, mde)
    n = n_clusters * design.eligible_per_cluster
    se = math.sqrt(deff / n)
    if sd_d == 0.0:
        return 1.0
    if rule == "paired":
        return _phi(mde / (se * sd_d) - z)
    return _phi((mde - z * se * (sd_a + sd_b)) / (se * sd_d))


def zero_flip_upper(n_eff: float, level: float = 0.95) -> float:
    """The one-sided ``level`` upper bound of a rate with 0 events in ``n_eff`` trials:
    1 − α^(1/n), α = 1 − level (Clopper–Pearson; the beta quantile B(level; 1, n))."""
    _check_number("level", level, 0.0, 1.0, open_lo=True, open_hi=True)
    if not n_eff > 0:
        raise PeiraValueError(f"plan: n must be positive; got {n_eff!r}")
    return 1.0 - (1.0 - level) ** (1.0 / n_eff)


# ---------------------------------------------------------------- the plan


def plan_table(
    design: Design,
    mde: float,
    *,
    target_power: float = 0.8,
    level: float = 0.95,
    family_size: int = 1,
    n_clusters: int | None = None,
) -> pl.DataFrame:
    """One row per rule (:data:`RULES`): what the design needs for ``mde`` at
    ``target_power``, and the power of ``n_clusters`` scenarios (docs/spec/planning.md#the-plan).

    Columns: ``rule``, ``mde``, ``target_power``, ``level``, ``family_size``,
    ``asr``, ``asr_other`` (asr + mde), ``eligibility``, ``icc``,
    ``cases_per_cluster``, ``samples``, ``rho``, ``design_effect``, ``sd_diff``
    (σ_D), ``eligible_needed`` (pairs eligible for both), ``clusters_needed``,
    ``cases_needed``, ``pairs_needed``, ``n_clusters`` (the data's scenarios;
    null when none given), ``power`` (of those scenarios at ``mde``; null
    without them), ``zero_flip_upper`` (the bound of a '0 flips' claim at the
    planned size, on its effective n), ``zero_flip_upper_now`` (at
    ``n_clusters``), ``source``.
    """
    check_goal(mde, target_power, level, family_size)
    if n_clusters is not None and (
        isinstance(n_clusters, bool) or not isinstance(n_clusters, int) or n_clusters < 1
    ):
        raise PeiraValueError(f"plan: n_clusters must be a whole number ≥ 1; got {n_clusters!r}")
    deff, sd_d, _, _ = _per_pair(design, mde)
    rows = []
    for rule in RULES:
        kw = {"level": level, "rule": rule, "family_size": family_size}
        need = clusters_needed(design, mde, target_power=target_power, **kw)  # type: ignore[arg-type]
        eligible = need * design.eligible_per_cluster
        cases = math.ceil(need * design.cases_per_cluster - 1e-9)
        now = None if n_clusters is None else n_clusters * design.eligible_per_cluster
        rows.append(
            {
                "rule": rule,
                "mde": float(mde),
                "target_power": float(target_power),
                "level": float(level),
                "family_size": family_size if rule == "paired" else 1,
                "asr": design.asr,
                "asr_other": design.asr + mde,
                "eligibility": design.eligibility,
                "icc": design.icc,
                "cases_per_cluster": design.cases_per_cluster,
                "samples": design.samples,
                "rho": design.rho,
                "design_effect": deff,
                "sd_diff": sd_d,
                "eligible_needed": math.ceil(eligible - 1e-9),
                "clusters_needed": need,
                "cases_needed": cases,
                "pairs_needed": math.ceil(cases * design.samples - 1e-9),
                "n_clusters": n_clusters,
                "power": None if n_clusters is None else power(design, mde, n_clusters, **kw),  # type: ignore[arg-type]
                "zero_flip_upper": zero_flip_upper(eligible / deff, level),
                "zero_flip_upper_now": None if now is None else zero_flip_upper(now / deff, level),
                "source": design.source,
            }
        )
    return pl.DataFrame(
        rows, schema_overrides={"n_clusters": pl.Int64, "power": pl.Float64,
                                "zero_flip_upper_now": pl.Float64},
    )  # fmt: skip


# ---------------------------------------------------------------- estimates from a pilot


def icc_anova(sizes: Sequence[float], events: Sequence[float]) -> float | None:
    """The one-way ANOVA estimate of the intra-class correlation of a binary outcome
    (Donner 1986): clusters of ``sizes`` with ``events``.

    With N = Σn_c, K = Σk_c, C clusters and n₀ = (N − Σn_c²/N)/(C − 1):
    MSB = (Σk_c²/n_c − K²/N)/(C − 1), MSW = (K − Σk_c²/n_c)/(N − C),
    ICC = (MSB − MSW)/(MSB + (n₀ − 1)·MSW), clipped to [0, 1]. None when it
    has no within- or between-cluster information (fewer than two clusters,
    every cluster of one pair, or no variation at all).
    """
    pairs = [(float(n), float(k)) for n, k in zip(sizes, events, strict=True) if n > 0]
    c = len(pairs)
    big_n = sum(n for n, _ in pairs)
    if c < 2 or big_n - c < 1:
        return None
    k_all = sum(k for _, k in pairs)
    between = sum(k * k / n for n, k in pairs)
    msb = (between - k_all**2 / big_n) / (c - 1)
    msw = (k_all - between) / (big_n - c)
    n0 = (big_n - sum(n * n for n, _ in pairs) / big_n) / (c - 1)
    den = msb + (n0 - 1.0) * msw
    if den <= 0:
        return None
    return min(max((msb - msw) / den, 0.0), 1.0)


@dataclass(frozen=True)
class PilotEstimate:
    """A :class:`Design` estimated from a pilot log, with what it was estimated from."""

    design: Design
    n_clusters: int
    n_cases: int
    runs: tuple[str, ...]
    n_duels: int

    def as_dict(self) -> dict[str, object]:
        """The estimate as plain values (for a JSON note)."""
        return {**asdict(self.design), "n_clusters": self.n_clusters, "n_cases": self.n_cases,
                "runs": list(self.runs), "n_duels": self.n_duels}  # fmt: skip


def estimate_design(
    pairs: pl.DataFrame,
    cases: pl.DataFrame,
    *,
    runs: Sequence[str] | None = None,
    where: str = "pilot",
) -> PilotEstimate:
    """The design a pilot's pair table shows (docs/spec/planning.md#a-pilot).

    Per pair of ``runs`` (default every run; ``runs`` of two: that pair) on the
    (case, sample) pairs both answered: the share eligible for both
    (``eligibility``), the lower of the two runs' ASRs on them (``asr``) and
    the correlation of their flip indicators there (``rho``), each the mean
    over the pairs of runs with a pair eligible for both (``rho``: where it
    is defined); ``icc`` is the mean over the
    runs of :func:`icc_anova` of each run's flips among its eligible pairs by
    scenario; ``cases_per_cluster`` the cases per scenario of ``cases`` and
    ``samples`` the pairs per case answered, averaged over the runs.

    Raises
    ------
    UnknownNameError
        A run of ``runs`` that is not in the log.
    PeiraValueError
        Fewer than two runs, or no pair eligible for both runs.
    """
    have = sorted(pairs["run_id"].unique().to_list())
    chosen = have if runs is None else list(runs)
    for r in chosen:
        if r not in have:
            raise UnknownNameError("run", r, have)
    if len(set(chosen)) < 2:
        raise PeiraValueError(
            f"{where}: a plan compares two runs, and the log has {', '.join(chosen) or 'none'}; "
            "state the inputs instead (--asr, --eligibility, …)"
        )
    p = pairs.filter(pl.col("run_id").is_in(chosen)).select(
        "run_id", "case_id", "sample", "scenario_id",
        pl.col("eligible").fill_null(False), pl.col("flipped").fill_null(False),
    )  # fmt: skip
    elig, asrs, rhos = [], [], []
    names = sorted(set(chosen))
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            j = p.filter(pl.col("run_id") == a).join(
                p.filter(pl.col("run_id") == b), on=["case_id", "sample"], suffix="_b"
            )
            if j.is_empty():
                continue
            both = j.filter(pl.col("eligible") & pl.col("eligible_b"))
            if both.is_empty():  # nothing to compare: left out of every mean
                continue
            elig.append(both.height / j.height)
            x, y = both["flipped"].cast(pl.Float64), both["flipped_b"].cast(pl.Float64)
            asrs.append(min(float(x.mean()), float(y.mean())))  # type: ignore[arg-type]
            if x.std(ddof=0) and y.std(ddof=0):
                rhos.append(float(pl.DataFrame({"x": x, "y": y}).select(pl.corr("x", "y")).item()))
    if not asrs:
        raise PeiraValueError(
            f"{where}: no pair is eligible for both of two runs ({', '.join(names)})"
        )
    per_cluster = (
        p.filter(pl.col("eligible"))
        .group_by("run_id", "scenario_id")
        .agg(pl.len().alias("n"), pl.col("flipped").sum().alias("k"))
    )
    iccs = []
    for r in names:
        one = per_cluster.filter(pl.col("run_id") == r)
        v = icc_anova(one["n"].to_list(), one["k"].to_list())
        if v is not None:
            iccs.append(v)
    per_run = p.group_by("run_id").agg(pl.len().alias("n"), pl.col("case_id").n_unique().alias("c"))
    samples = float((per_run["n"] / per_run["c"]).mean())  # type: ignore[arg-type]
    n_clusters = int(cases["scenario_id"].n_unique())
    asr = sum(asrs) / len(asrs)
    if asr <= 0.0:
        raise PeiraValueError(
            f"{where}: no run flipped a pair eligible for both; the ASR cannot be estimated "
            "(state it with --asr)"
        )
    design = Design(
        asr=asr,
        eligibility=sum(elig) / len(elig),
        icc=sum(iccs) / len(iccs) if iccs else 0.0,
        cases_per_cluster=cases.height / n_clusters,
        rho=sum(rhos) / len(rhos) if rhos else 0.0,
        samples=max(samples, 1.0),
        source=f"{where}: {len(names)} runs, {len(asrs)} of "
        f"{len(names) * (len(names) - 1) // 2} pair(s) of runs with pairs eligible for both, "
        f"{cases.height} cases in {n_clusters} scenarios",
    )
    return PilotEstimate(design, n_clusters, cases.height, tuple(names), len(asrs))


def with_stated(design: Design, **stated: float | None) -> Design:
    """``design`` with the values given (not None) in place of the estimates; the source
    names them."""
    given = {k: float(v) for k, v in stated.items() if v is not None}
    if not given:
        return design
    source = design.source + "; stated: " + ", ".join(sorted(given))
    return replace(design, **given, source=source)
