"""Agreement between judges: Cohen's κ, Fleiss' κ and Krippendorff's α (docs/spec/agreement.md).

Every statistic here is a function of sums over clusters, so the cluster
bootstrap (:mod:`peira.bootstrap.agreement`) recomputes it from the same sums
weighted by the resample counts ``W``:

- a pair of judges: the K × K contingency table of their determined verdicts
  (Cohen's κ, raw agreement; Fleiss' κ of two judges is Scott's π and the
  coincidence matrix of Krippendorff's α is the table plus its transpose);
- a panel of m ≥ 3 judges: over the items every judge judged with a
  determined verdict, the item count N, Σ_i Σ_k n_ik² and the category totals
  (Fleiss' κ); over the items with at least two determined verdicts, the
  coincidence matrix o (Krippendorff's α, nominal).

Every function takes arrays with any leading shape (one resample, or a block
of them) and returns NaN where the statistic is undefined.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "GOLD",
    "NOT_JUDGED",
    "UNDETERMINED",
    "UNDETERMINED_CODE",
    "cohen_kappa",
    "coincidences",
    "fleiss_kappa",
    "fleiss_sums",
    "krippendorff_alpha",
    "pair_table",
    "raw_agreement",
]

F64 = npt.NDArray[np.float64]

#: The judge name reserved for human labels (left out of a panel unless asked).
GOLD = "gold"
#: The verdict of a judge that could not decide.
UNDETERMINED = "undetermined"
#: Codes of a verdict matrix: ≥ 0 a category, these two the rest.
UNDETERMINED_CODE = -1
NOT_JUDGED = -2


def _div(a: F64, b: F64) -> F64:
    out = np.full(np.broadcast(a, b).shape, np.nan)
    np.divide(a, b, out=out, where=b != 0)
    return out


def pair_table(
    ci: npt.NDArray[Any], a: npt.NDArray[Any], b: npt.NDArray[Any], c: int, k: int
) -> F64:
    """C × K × K counts: items of cluster ``ci`` with verdict codes ``a`` and ``b`` (both ≥ 0)."""
    keep = (a >= 0) & (b >= 0)
    idx = (ci[keep] * k + a[keep]) * k + b[keep]
    return np.bincount(idx, minlength=c * k * k).astype(np.float64).reshape(c, k, k)


def raw_agreement(t: F64) -> F64:
    """Share of items on the diagonal of ``t`` (…, K, K)."""
    return _div(np.trace(t, axis1=-2, axis2=-1), t.sum(axis=(-2, -1)))


def cohen_kappa(t: F64) -> F64:
    """Cohen's κ of contingency tables ``t`` (…, K, K), unweighted.

    κ = 1 − Σ w·t / Σ w·e with w = 1 − I and e = r cᵀ / N, the form of
    :func:`sklearn.metrics.cohen_kappa_score`; undefined (NaN) when N = 0 or
    the expected disagreement is 0.
    """
    k = t.shape[-1]
    w = 1.0 - np.eye(k)
    n = t.sum(axis=(-2, -1))
    r = t.sum(axis=-1)
    col = t.sum(axis=-2)
    e = _div(r[..., :, None] * col[..., None, :], n[..., None, None])
    return 1.0 - _div((w * t).sum(axis=(-2, -1)), (w * e).sum(axis=(-2, -1)))


def fleiss_sums(v: npt.NDArray[Any], ci: npt.NDArray[Any], c: int, k: int) -> F64:
    """C × (2 + K) sums over the items every judge judged with a determined verdict:
    item count N, Σ_k n_ik² and the category totals (``v``: items × m codes)."""
    full = (v >= 0).all(axis=1)
    counts = _category_counts(v[full], k)
    out = np.zeros((c, 2 + k))
    cc = ci[full]
    out[:, 0] = np.bincount(cc, minlength=c)
    out[:, 1] = np.bincount(cc, (counts**2).sum(axis=1), minlength=c)
    for j in range(k):
        out[:, 2 + j] = np.bincount(cc, counts[:, j], minlength=c)
    return out


def fleiss_kappa(s: F64, m: int) -> tuple[F64, F64]:
    """(Fleiss' κ, mean pairwise agreement P̄) from sums ``s`` (…, 2 + K) of m judges.

    P̄ = (Σ n_ik² − N m) / (N m (m − 1)); p_k = T_k / (N m); P_e = Σ p_k²;
    κ = (P̄ − P_e) / (1 − P_e) (statsmodels' ``fleiss_kappa``).
    """
    n = s[..., 0]
    p_bar = _div(s[..., 1] - n * m, n * m * (m - 1.0))
    p = _div(s[..., 2:], (n * m)[..., None])
    p_e = (p * p).sum(axis=-1)
    return _div(p_bar - p_e, 1.0 - p_e), p_bar


def coincidences(v: npt.NDArray[Any], ci: npt.NDArray[Any], c: int, k: int) -> F64:
    """C × K × K coincidence matrices of Krippendorff's α (nominal) per cluster.

    A unit (item) with m_u ≥ 2 determined verdicts, n_uk of category k,
    adds (n_uk n_ul − [k = l] n_uk) / (m_u − 1) to o_kl; units with fewer are
    not pairable and add nothing.
    """
    counts = _category_counts(v, k)
    m_u = counts.sum(axis=1)
    keep = m_u >= 2
    n_u, m_k, cc = counts[keep], m_u[keep], ci[keep]
    o = (n_u[:, :, None] * n_u[:, None, :]) - n_u[:, :, None] * np.eye(k)[None]
    o /= (m_k - 1.0)[:, None, None]
    out = np.zeros((c, k * k))
    flat = o.reshape(-1, k * k)
    for j in range(k * k):
        out[:, j] = np.bincount(cc, flat[:, j], minlength=c)
    return out.reshape(c, k, k)


def krippendorff_alpha(o: F64) -> F64:
    """Krippendorff's α (nominal) of coincidence matrices ``o`` (…, K, K).

    α = 1 − (n − 1) (n − Σ_k o_kk) / (n² − Σ_k n_k²), n_k = Σ_l o_kl, n = Σ n_k;
    undefined (NaN) when n ≤ 1 or every pairable value is one category.
    """
    nk = o.sum(axis=-1)
    n = nk.sum(axis=-1)
    d_o = n - np.trace(o, axis1=-2, axis2=-1)
    d_e = n * n - (nk * nk).sum(axis=-1)
    out = 1.0 - _div((n - 1.0) * d_o, d_e)
    return np.where(n > 1, out, np.nan)


def _category_counts(v: npt.NDArray[Any], k: int) -> F64:
    """Items × K: how many judges gave each category (codes < 0 count nowhere)."""
    out = np.zeros((v.shape[0], k))
    for j in range(k):
        out[:, j] = (v == j).sum(axis=1)
    return out
