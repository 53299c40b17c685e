"""Cases and variants of the synthetic benchmark: scenario clusters, gold decisions,
splits, primitives, severities, attacks and their prompts.

:func:`build_cases` draws everything from the ``cases`` stream and returns the
two tables plus the per-case arrays the simulation needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from ..canonical import canonical_text
from ..schema import CASES_SCHEMA, PRIMITIVES, SEVERITIES, VARIANTS_SCHEMA
from ._rng import STREAM_CASES, BoolArray, FloatArray, IntArray, stream_rng
from .catalog import DOMAINS, FAMILIES, FAMILY_TABLE, ROLES, TOOLS

__all__ = ["ABSTAIN", "CHOICE", "SCORE", "CaseArrays", "build_cases"]

_SEVERITY_P = np.array([0.15, 0.30, 0.35, 0.20])  # in the order of schema.SEVERITIES
_CLUSTER_P = np.array([0.15, 0.20, 0.20, 0.20, 0.15, 0.10])  # sizes 1..6
_SCORE_SHARE, _ABSTAIN_SHARE, _HOLDOUT_SHARE = 0.16, 0.10, 0.20
CHOICE, SCORE, ABSTAIN = 0, 1, 2  # indices into schema.PRIMITIVES
_MAX_OPTIONS = 4


@dataclass(frozen=True)
class CaseArrays:
    """Per-case arrays the simulation needs (case order = cases frame order)."""

    n_options: IntArray
    expected: IntArray
    target: IntArray  # -1: none
    positive: IntArray  # -1: not a score case
    primitive: IntArray
    scenario: IntArray
    holdout: BoolArray
    attack_logit: FloatArray
    difficulty: FloatArray  # per scenario
    options: npt.NDArray[np.str_]  # (n_cases, _MAX_OPTIONS), padded with ""
    tokens_in: IntArray  # (n_cases, 2): benign, attacked


def build_cases(n_cases: int, seed: int) -> tuple[pl.DataFrame, pl.DataFrame, CaseArrays]:
    rng = stream_rng(seed, STREAM_CASES)
    sizes = rng.choice(6, size=n_cases, p=_CLUSTER_P) + 1
    cum = np.cumsum(sizes)
    n_scn = int(np.searchsorted(cum, n_cases)) + 1
    sizes = sizes[:n_scn].copy()
    sizes[-1] -= int(cum[n_scn - 1]) - n_cases
    scenario = np.repeat(np.arange(n_scn), sizes)

    # scenario level: situation, gold decision, shared difficulty, split
    domain = rng.integers(len(DOMAINS), size=n_scn)
    n_opt_s = np.array([len(DOMAINS[d].options) for d in domain])
    expected_s = rng.integers(0, n_opt_s)
    difficulty = rng.normal(0.0, 0.5, size=n_scn)
    holdout_s = np.zeros(n_scn, dtype=bool)
    n_holdout = round(_HOLDOUT_SHARE * n_cases) if n_scn >= 2 else 0
    if n_holdout:
        perm = rng.permutation(n_scn)
        k = int(np.searchsorted(np.cumsum(sizes[perm]), n_holdout)) + 1
        holdout_s[perm[: min(k, n_scn - 1)]] = True

    # case level
    fam_names = list(FAMILIES)
    fam_w = np.array([FAMILY_TABLE[f].weight for f in fam_names])
    fam_p = fam_w / fam_w.sum()
    primary = rng.choice(len(fam_names), size=n_scn, p=fam_p)
    family = np.where(
        rng.random(n_cases) < 0.5,
        primary[scenario],
        rng.choice(len(fam_names), size=n_cases, p=fam_p),
    )
    severity = rng.choice(4, size=n_cases, p=_SEVERITY_P)
    n_opt = n_opt_s[scenario]
    expected = expected_s[scenario]

    primitive = np.full(n_cases, CHOICE)
    binary = np.flatnonzero(n_opt == 2)
    n_score = min(round(_SCORE_SHARE * n_cases), binary.size)
    primitive[rng.permutation(binary)[:n_score]] = SCORE
    rest = np.flatnonzero(primitive == CHOICE)
    primitive[rng.permutation(rest)[: min(round(_ABSTAIN_SHARE * n_cases), rest.size)]] = ABSTAIN

    p_untargeted = np.array([FAMILY_TABLE[f].p_untargeted for f in fam_names])[family]
    untargeted = rng.random(n_cases) < p_untargeted
    other = (expected + 1 + rng.integers(0, n_opt - 1)) % n_opt
    target = np.where(untargeted, -1, other)
    attack_logit = np.array([FAMILY_TABLE[f].effect for f in fam_names])[family] + rng.normal(
        0.0, 0.5, size=n_cases
    )
    exp_score_u = rng.random(n_cases)
    template_u = rng.random(n_cases)
    attack_nums = rng.integers(0, 1 << 30, size=(n_cases, 5))

    # texts: one benign prompt per scenario, one attack per case
    benign_prompts: list[str] = []
    for s in range(n_scn):
        dom = DOMAINS[int(domain[s])]
        vals: dict[str, Any] = {
            "id": int(rng.integers(1000, 10000)),
            "id2": int(rng.integers(100, 1000)),
            "amount": f"{int(rng.integers(2, 500)) * 10:,}",
            "days": int(rng.integers(2, 28)),
            "big_days": int(rng.integers(120, 400)),
            "count": int(rng.integers(3, 40)),
            "years": int(rng.integers(2, 15)),
            "dti": int(rng.integers(12, 55)),
        }
        for key, choices in dom.slots.items():
            vals[key] = choices[int(rng.integers(len(choices)))]
        facts = dom.facts[dom.options[int(expected_s[s])]]
        fact = facts[int(rng.integers(len(facts)))]
        benign_prompts.append(
            " ".join(
                (
                    dom.task,
                    dom.subject.format(**vals),
                    fact.format(**vals),
                    f"Answer with one of: {', '.join(dom.options)}.",
                )
            )
        )

    n_digits = max(4, len(str(n_cases)))
    case_rows: list[dict[str, Any]] = []
    variant_rows: list[dict[str, Any]] = []
    options_arr = np.full(
        (n_cases, _MAX_OPTIONS), "", dtype=f"<U{max(len(o) for d in DOMAINS for o in d.options)}"
    )
    tokens_in = np.zeros((n_cases, 2), dtype=np.int64)
    for c in range(n_cases):
        s = int(scenario[c])
        dom = DOMAINS[int(domain[s])]
        opts = list(dom.options)
        options_arr[c, : len(opts)] = opts
        fam = fam_names[int(family[c])]
        spec = FAMILY_TABLE[fam]
        templates = spec.untargeted if target[c] < 0 else spec.targeted
        tpl = templates[int(template_u[c] * len(templates))]
        nums = attack_nums[c]
        attack = tpl.format(
            target=opts[int(target[c])] if target[c] >= 0 else "",
            role=ROLES[int(nums[0] % len(ROLES))],
            tool=TOOLS[int(nums[1] % len(TOOLS))],
            pct=60 + int(nums[2] % 38),
            minutes=5 + int(nums[3] % 40),
            year=2023 + int(nums[4] % 4),
        )
        benign = benign_prompts[s]
        attacked = f"{attack} {benign}" if fam == "role_confusion" else f"{benign} {attack}"
        prim = int(primitive[c])
        exp_name = opts[int(expected[c])]
        positive = dom.positive if prim == SCORE else None
        expected_score = None
        if prim == SCORE:
            u = float(exp_score_u[c])
            expected_score = (
                round(0.65 + 0.30 * u, 2) if exp_name == dom.positive else round(0.05 + 0.30 * u, 2)
            )
        case_id = f"{spec.abbr}-{c + 1:0{n_digits}d}"
        case_rows.append(
            {
                "case_id": case_id,
                "scenario_id": f"s{s + 1:0{n_digits}d}",
                "split": "holdout" if holdout_s[s] else "public",
                "suite": "main",
                "family": fam,
                "primitive": PRIMITIVES[prim],
                "severity": SEVERITIES[int(severity[c])],
                "options": opts,
                "expected_decision": exp_name,
                "positive_decision": positive,
                "target_decision": opts[int(target[c])] if target[c] >= 0 else None,
                "expected_score": expected_score,
                "dataset_version": "",  # filled by generate
                "extras": canonical_text(
                    {
                        "attack_logit": round(float(attack_logit[c]), 6),
                        "difficulty_logit": round(float(difficulty[s]), 6),
                        "domain": dom.name,
                    }
                ),
            }
        )
        for arm, prompt in (("benign", benign), ("attacked", attacked)):
            variant_rows.append(
                {
                    "case_id": case_id,
                    "arm": arm,
                    "prompt": prompt,
                    "options": opts,
                    "input": canonical_text({"options": opts, "prompt": prompt}),
                }
            )
        tokens_in[c] = (60 + (len(benign) + 3) // 4, 60 + (len(attacked) + 3) // 4)

    positive_idx = np.full(n_cases, -1)
    for i in np.flatnonzero(primitive == SCORE):
        dom = DOMAINS[int(domain[scenario[i]])]
        positive_idx[i] = dom.options.index(dom.positive)

    arrays = CaseArrays(
        n_options=n_opt.astype(np.int64),
        expected=expected.astype(np.int64),
        target=target.astype(np.int64),
        positive=positive_idx.astype(np.int64),
        primitive=primitive.astype(np.int64),
        scenario=scenario.astype(np.int64),
        holdout=holdout_s[scenario],
        attack_logit=attack_logit,
        difficulty=difficulty,
        options=options_arr,
        tokens_in=tokens_in,
    )
    cases = pl.DataFrame(case_rows, schema=CASES_SCHEMA)
    variants = pl.DataFrame(variant_rows, schema=VARIANTS_SCHEMA)
    return cases, variants, arrays
