"""Deterministic cluster-bootstrap confidence intervals (docs/spec/uncertainty.md).

Draw the plan once; apply every statistic to it.

- :mod:`.plan` — :class:`ResamplePlan`: the B × C matrix ``W`` of cluster
  counts, drawn from PCG64's raw stream, with its fingerprint.
- :mod:`.intervals` — percentile and BCa intervals from replicates, and the
  single-statistic :func:`bootstrap` (scipy's shape, frozen
  :class:`BootstrapResult`).
- :mod:`.ratio` — :func:`ratio_intervals` for every ratio metric × run ×
  group from one GEMM per group, :func:`replicates` and
  :func:`paired_differences` for head-to-head.
- :mod:`.macro` — :func:`macro_intervals`: unweighted means over groups
  (families) of ratio metrics, from the groups' replicates on one plan.
- :mod:`.nonratio` — :func:`nonratio_intervals`: AUROC, miscalibration, ECE,
  Brier and mean shifts through case weights expanded from ``W``.
- :mod:`.ranks` — :func:`rank_intervals`: simultaneous rank intervals, tie
  groups and the top-K set of a board from the paired replicates of every
  pairwise difference (max-T step-down, Mogstad, Romano, Shaikh & Wilhelm).
- :mod:`.smallcell` — design-effect-adjusted binomial intervals (Korn &
  Graubard) for the rows the bootstrap cannot carry, and the rule that
  decides which rows those are.
- :mod:`.compat` — the reference implementation's case-level bootstrap and
  Wilson intervals, for parity checks.
"""

from .compat import Z95, compat_bootstrap, compat_draws, wilson_interval
from .intervals import DEFAULT_METHOD, METHODS, BootstrapResult, Method, bootstrap
from .macro import macro_intervals
from .nonratio import NONRATIO_INTERVAL_METRICS, nonratio_intervals
from .plan import (
    FINGERPRINT_ROWS,
    MIN_CLUSTERS,
    FewClustersWarning,
    PeiraWarning,
    PlanMismatchError,
    ResamplePlan,
    Unit,
    make_plan,
    plan_fingerprint,
    plan_for_cases,
)
from .ranks import (
    RANK_COLUMNS,
    RankIntervals,
    board_ranks,
    check_top_k,
    duel_rank_intervals,
    rank_intervals,
    tie_groups,
)
from .ratio import Replicates, paired_differences, ratio_intervals, replicates
from .smallcell import (
    CellStats,
    binomial_interval,
    bootstrap_carries,
    cell_stats,
    design_interval,
    effective_size,
)

__all__ = [
    "DEFAULT_METHOD",
    "FINGERPRINT_ROWS",
    "METHODS",
    "MIN_CLUSTERS",
    "NONRATIO_INTERVAL_METRICS",
    "RANK_COLUMNS",
    "Z95",
    "BootstrapResult",
    "CellStats",
    "FewClustersWarning",
    "Method",
    "PeiraWarning",
    "PlanMismatchError",
    "RankIntervals",
    "Replicates",
    "ResamplePlan",
    "Unit",
    "binomial_interval",
    "board_ranks",
    "bootstrap",
    "bootstrap_carries",
    "cell_stats",
    "check_top_k",
    "compat_bootstrap",
    "compat_draws",
    "design_interval",
    "duel_rank_intervals",
    "effective_size",
    "macro_intervals",
    "make_plan",
    "nonratio_intervals",
    "paired_differences",
    "plan_fingerprint",
    "plan_for_cases",
    "rank_intervals",
    "ratio_intervals",
    "replicates",
    "tie_groups",
    "wilson_interval",
]
