"""Built-in adapters: offline test doubles for :func:`peira.run.run`.

:class:`Constant`
    Always answers the same option position, instantly (runner benchmarks).
:class:`Simulated`
    A simulated decision model (archetypes like those of :mod:`peira.synth`)
    that answers in the synthetic ``raw_text`` grammar, so the whole pipeline
    — run, parse, score — works offline.
:class:`Replay`
    Replays an existing response log: running it through :func:`peira.run.run`
    reproduces that log row for row.

How the simulation stays honest
-------------------------------
An adapter only ever receives a :class:`~peira.run.Request` (the blinded
variant and the sample index). :class:`Simulated` cannot know the gold label
from it, so it is given an *oracle* at construction — a test double's
privilege, never a real model's: a map from the *content* of each variant
(hash of prompt and options, not its id) to what the dataset says about that
content (the expected decision, and for an attacked prompt the attacker's
target and the benign prompt it perturbs). Every random draw is a hash of
(seed, archetype parameters, content, sample, purpose), so a simulated model
answers the same request the same way whatever the key, the dispatch order,
the concurrency or the interruptions. Without an oracle it still answers
deterministically, but knows nothing (its decisions are hash-picked
options) and warns (:class:`~peira.errors.PeiraWarning`).

:class:`Replay` likewise receives the dataset, the log and the pseudonym key
at construction and maps each ``variant_id`` back to its (case, arm) itself —
again a test double: the runner gives it nothing but the request.
"""

from __future__ import annotations

import hashlib
import math
import os
import struct
from collections.abc import Mapping
from dataclasses import asdict, astuple, dataclass, replace
from typing import Any

import polars as pl

from ..errors import PeiraError, PeiraWarning, warn
from ..io import Dataset, read_dataset, read_responses
from ..run.protocol import Decision, Request

__all__ = [
    "ARCHETYPES",
    "AsyncConstant",
    "Constant",
    "Replay",
    "SimParams",
    "Simulated",
    "content_key",
]

PathLike = str | os.PathLike[str]


def content_key(prompt: str, options: tuple[str, ...] | list[str]) -> str:
    """A hash of what a model sees of a variant (prompt and options), hex."""
    h = hashlib.sha256(prompt.encode("utf-8"))
    for o in options:
        h.update(b"\x1f" + o.encode("utf-8"))
    return h.hexdigest()


# ---------------------------------------------------------------- constant


class Constant:
    """Answers ``options[index]`` (clamped) at once; for runner benchmarks and tests.

    Examples
    --------
    >>> from peira.run import Request
    >>> Constant(index=1).decide(Request("v-1", "choice", "p", ("a", "b"), "{}")).decision
    'b'
    """

    def __init__(
        self, index: int = 0, *, name: str = "constant", version: str = "1.0", raw_text: bool = True
    ) -> None:
        self.index, self.name, self.version, self.raw_text = index, name, version, raw_text

    def config(self) -> dict[str, Any]:
        """What determines the answers (recorded in a run's checkpoint manifest)."""
        return {
            "index": self.index,
            "name": self.name,
            "version": self.version,
            "raw_text": self.raw_text,
        }

    def decide(self, request: Request) -> Decision:
        """The option at ``index`` (or the last)."""
        d = request.options[min(self.index, len(request.options) - 1)]
        return Decision(decision=d, raw_text=f"Decision: {d}" if self.raw_text else None)


class AsyncConstant(Constant):
    """:class:`Constant` with an ``async def decide`` (no thread per call)."""

    async def decide(self, request: Request) -> Decision:  # type: ignore[override]
        """The option at ``index`` (or the last)."""
        return Constant.decide(self, request)


# ---------------------------------------------------------------- simulated


@dataclass(frozen=True)
class SimParams:
    """Behaviour of a simulated model (probabilities per call).

    ``accuracy`` is P(correct | decided) on benign prompts; an attack succeeds
    with ``flip_prob`` and then ends as an abstention with ``dos_share``
    (else as the target, or another option when untargeted); otherwise the
    attacked answer repeats the benign one. ``malformed_rate`` of calls fail
    (provider error, timeout or unparseable text, with the reason).
    Confidence is ``conf_correct`` / ``conf_wrong`` / ``conf_flipped`` ± 0.1
    (2 decimals); scores (score cases, 3 decimals) lie on the side of
    ``threshold`` that the decision implies.
    """

    accuracy: float = 0.9
    flip_prob: float = 0.2
    dos_share: float = 0.1
    abstain_rate: float = 0.02
    refusal_share: float = 0.3
    malformed_rate: float = 0.005
    conf_correct: float = 0.82
    conf_wrong: float = 0.65
    conf_flipped: float = 0.6
    threshold: float = 0.5
    latency_base_ms: float = 600.0
    ms_per_token: float = 12.0


ARCHETYPES: dict[str, SimParams] = {
    "robust": SimParams(accuracy=0.93, flip_prob=0.06, dos_share=0.15, malformed_rate=0.004),
    "fragile": SimParams(accuracy=0.86, flip_prob=0.45, malformed_rate=0.008, latency_base_ms=350),
    "abstain-dos": SimParams(accuracy=0.88, flip_prob=0.45, dos_share=0.9, abstain_rate=0.03),
    "always-abstain": SimParams(abstain_rate=1.0, flip_prob=0.0, dos_share=0.0, malformed_rate=0),
    "conf-spoof": SimParams(accuracy=0.87, flip_prob=0.3, conf_wrong=0.88, conf_flipped=0.9),
    "malformed": SimParams(accuracy=0.85, flip_prob=0.2, malformed_rate=0.055),
}
"""Parameter presets of :class:`Simulated`."""

_REFUSALS = ("content_policy", "safety_filter")
_DOS_REFUSALS = ("prompt_injection_detected", "manipulation_suspected")
_EXPLANATIONS = ("insufficient information to decide", "this needs human review")
_MALFORMED: tuple[tuple[str | None, str], ...] = (
    (None, "HTTP 503 from provider: upstream overloaded"),
    (None, "timeout after 30000 ms"),
    ('{"decision": "', "unparseable output: truncated JSON"),
    ("", "empty response"),
    ("Decision: maybe (confidence 0.50)", "decision outside options: 'maybe'"),
)


@dataclass(frozen=True)
class _Known:
    """What the oracle knows about one content."""

    expected: str
    positive: str | None
    target: str | None
    benign: str | None  # content key of the benign prompt, for attacked content


def _oracle(dataset: Dataset) -> dict[str, _Known]:
    cols = ["case_id", "expected_decision", "positive_decision", "target_decision"]
    v = dataset.variants.join(dataset.cases.select(cols), on="case_id", how="left").sort(
        "case_id", "arm"
    )
    benign_key = {
        r["case_id"]: content_key(r["prompt"], r["options"])
        for r in v.filter(pl.col("arm") == "benign").iter_rows(named=True)
    }
    out: dict[str, _Known] = {}
    for r in v.iter_rows(named=True):
        k = content_key(r["prompt"], r["options"])
        attacked = r["arm"] == "attacked"
        out.setdefault(
            k,
            _Known(
                r["expected_decision"],
                r["positive_decision"],
                r["target_decision"] if attacked else None,
                benign_key[r["case_id"]] if attacked else None,
            ),
        )
    return out


class Simulated:
    """A simulated decision model answering in the synthetic raw-text grammar.

    Parameters
    ----------
    dataset
        Dataset (or directory) from which the hidden oracle is built; None: no
        oracle (deterministic, uninformed answers — a
        :class:`~peira.errors.PeiraWarning` says so; ``peira run`` passes its
        ``--dataset`` unless ``--adapter-arg dataset=…`` is given).
    archetype
        A preset of :data:`ARCHETYPES`.
    seed
        Varies every draw.
    name, version
        Default ``synth-{archetype}`` and ``"sim-1"``.
    **params
        Overrides of :class:`SimParams` fields.

    Notes
    -----
    A test double (see the module notes): the oracle maps request *content*
    to the dataset's labels; the adapter never learns case ids or arms. A
    variant's draws depend only on (seed, parameters, content, sample).
    """

    def __init__(
        self,
        dataset: Dataset | PathLike | None = None,
        *,
        archetype: str = "robust",
        seed: int = 0,
        name: str | None = None,
        version: str = "sim-1",
        **params: Any,
    ) -> None:
        if archetype not in ARCHETYPES:
            raise PeiraError(f"unknown archetype {archetype!r}; known: {sorted(ARCHETYPES)}")
        try:
            self.params = replace(ARCHETYPES[archetype], **params)
        except TypeError as exc:
            raise PeiraError(f"Simulated: {exc}") from exc
        self.archetype, self.seed = archetype, int(seed)
        self.name = name or f"synth-{archetype}"
        self.version = version
        ds = read_dataset(dataset) if isinstance(dataset, str | os.PathLike) else dataset
        if ds is None:
            warn(
                f"Simulated({archetype!r}) has no dataset, so no oracle: it answers "
                "uninformed (hash-picked options, benign accuracy near chance); pass "
                "dataset= (peira run: --adapter-arg dataset=DIR, or just --dataset)",
                PeiraWarning,
            )
        self._oracle = _oracle(ds) if ds is not None else {}
        self._oracle_digest: str | None = None
        self._salt = repr((self.seed, sorted(asdict(self.params).items()))).encode()

    def config(self) -> dict[str, Any]:
        """What determines the answers (recorded in a run's checkpoint manifest).

        The archetype, seed, parameters, name, version and a digest of the
        oracle (null without one) — not the dataset path.
        """
        if self._oracle_digest is None and self._oracle:
            h = hashlib.sha256()
            for k in sorted(self._oracle):
                h.update(repr((k, astuple(self._oracle[k]))).encode("utf-8"))
            self._oracle_digest = h.hexdigest()
        return {
            "archetype": self.archetype,
            "seed": self.seed,
            "params": asdict(self.params),
            "name": self.name,
            "version": self.version,
            "oracle": self._oracle_digest,
        }

    # one uniform in [0, 1) per (content, sample, purpose)
    def _u(self, key: str, sample: int, purpose: str) -> float:
        h = hashlib.blake2b(
            self._salt + key.encode() + struct.pack("<q", sample) + purpose.encode(), digest_size=8
        ).digest()
        return (int.from_bytes(h, "little") >> 11) * (1.0 / (1 << 53))

    def _pick_other(self, options: tuple[str, ...], avoid: str, u: float) -> str:
        others = [o for o in options if o != avoid] or list(options)
        return others[min(int(u * len(others)), len(others) - 1)]

    def _latent(self, key: str, options: tuple[str, ...], sample: int) -> tuple[str | None, bool]:
        """(decision or None when abstaining, correct) of the benign content ``key``."""
        p = self.params
        if self._u(key, sample, "abstain") < p.abstain_rate:
            return None, False
        known = self._oracle.get(key)
        if known is None:  # no oracle: an uninformed, deterministic pick
            u = self._u(key, sample, "pick")
            return options[min(int(u * len(options)), len(options) - 1)], False
        if self._u(key, sample, "correct") < p.accuracy:
            return known.expected, True
        return self._pick_other(options, known.expected, self._u(key, sample, "wrong")), False

    def decide(self, request: Request) -> Decision:
        """Answer one request (deterministic in content and sample)."""
        p, s, opts = self.params, request.sample, request.options
        own = content_key(request.prompt, opts)
        known = self._oracle.get(own)
        tokens_in = max(1, len(request.input) // 4)
        if self._u(own, s, "malformed") < p.malformed_rate:
            raw, err = _MALFORMED[int(self._u(own, s, "malformed-kind") * len(_MALFORMED))]
            return Decision(
                raw_text=raw, error=err, tokens_in=tokens_in, latency_ms=p.latency_base_ms / 5
            )
        attacked = known is not None and known.benign is not None
        base = known.benign if attacked and known and known.benign else own
        decision, correct = self._latent(base, opts, s)
        changed = False
        if attacked and known is not None and self._u(own, s, "attack") < p.flip_prob:
            if self._u(own, s, "dos") < p.dos_share:
                changed, decision = decision is not None, None
            else:
                goal = known.target or self._pick_other(
                    opts, decision or known.expected, self._u(own, s, "untargeted")
                )
                changed, decision = goal != decision, goal
        if decision is None:
            refused = self._u(own, s, "refusal") < p.refusal_share
            pool = _DOS_REFUSALS if attacked else _REFUSALS
            pick = int(self._u(own, s, "why") * 2)
            raw = f"REFUSED: {pool[pick]}" if refused else f"ABSTAIN: {_EXPLANATIONS[pick]}"
            return self._usage(
                Decision(abstained=True, refusal_reason=pool[pick] if refused else None),
                raw,
                tokens_in,
            )
        mean = p.conf_flipped if changed else (p.conf_correct if correct else p.conf_wrong)
        conf_k = min(100, max(0, round(100 * (mean + 0.2 * (self._u(own, s, "conf") - 0.5)))))
        conf = conf_k / 100  # correctly rounded: equals float of the printed digits
        c_txt = f"{conf_k // 100}.{conf_k % 100:02d}"
        score: float | None = None
        if request.primitive == "score":
            positive = known.positive if known is not None and known.positive else opts[0]
            t = round(p.threshold * 1000)
            u = self._u(own, s, "score")
            k = t + math.floor(u * (1001 - t)) if decision == positive else math.floor(u * t)
            k = min(1000, max(0, k))
            score = k / 1000
            raw = f"Score: {k // 1000}.{k % 1000:03d} -> {decision} (confidence {c_txt})"
        else:
            raw = f"Decision: {decision} (confidence {c_txt})"
        return self._usage(
            Decision(decision=decision, score=score, confidence=conf), raw, tokens_in
        )

    def _usage(self, d: Decision, raw: str, tokens_in: int) -> Decision:
        tokens_out = max(1, len(raw) // 4)
        latency = round(self.params.latency_base_ms + self.params.ms_per_token * tokens_out, 1)
        return replace(
            d, raw_text=raw, tokens_in=tokens_in, tokens_out=tokens_out, latency_ms=latency
        )


# ---------------------------------------------------------------- replay


class Replay:
    """Replays one run of a response log: ``run`` through it reproduces the log.

    Parameters
    ----------
    log
        A response log (frame or path).
    dataset
        The dataset the log answers (a :class:`~peira.io.Dataset` or directory).
    key, key_file
        The pseudonym key the runner uses (bytes, or a file holding it); the
        adapter recomputes the pseudonyms to find each request's (case, arm).
    run_id
        Which run of the log to replay (required when it holds several).

    Notes
    -----
    A test double: it is handed the dataset and the key at construction.
    ``name``, ``version`` and ``run_id`` are the replayed run's, so the new
    log carries the same identity. A malformed logged row is replayed as a
    reported failure (``Decision.error``) with its raw text and usage.
    """

    def __init__(
        self,
        log: pl.DataFrame | PathLike,
        dataset: Dataset | PathLike,
        *,
        key: bytes | None = None,
        key_file: PathLike | None = None,
        run_id: str | None = None,
    ) -> None:
        from ..holdout import pseudonyms

        ds = dataset if isinstance(dataset, Dataset) else read_dataset(dataset)
        df = log if isinstance(log, pl.DataFrame) else read_responses(log, cases=ds.cases)
        if key is None:
            if key_file is None:
                raise PeiraError("Replay needs the runner's pseudonym key (key= or key_file=)")
            from ..integrity.keys import load_key

            key = load_key(key_file, purpose="holdout", required=True)
        assert key is not None
        runs = df["run_id"].unique().sort().to_list()
        if run_id is None:
            if len(runs) != 1:
                raise PeiraError(f"the log holds {len(runs)} runs {runs[:5]}; pass run_id=")
            run_id = runs[0]
        df = df.filter(pl.col("run_id") == run_id)
        if df.is_empty():
            raise PeiraError(f"run_id {run_id!r} is not in the log (runs: {runs[:5]})")
        self.run_id: str = run_id
        self.name: str = df["model"][0]
        self.version: str = df["model_version"][0]
        ids = pseudonyms(ds.variants, key)
        self._where: Mapping[str, tuple[str, str]] = dict(
            zip(ids["variant_id"], zip(ids["case_id"], ids["arm"], strict=True), strict=True)
        )
        self._rows: dict[tuple[str, str, int], dict[str, Any]] = {
            (r["case_id"], r["arm"], r["sample"]): r for r in df.iter_rows(named=True)
        }

    def decide(self, request: Request) -> Decision:
        """The logged answer of the request's (case, arm, sample)."""
        case_id, arm = self._where[request.variant_id]
        r = self._rows[(case_id, arm, request.sample)]
        usage = {k: r[k] for k in ("raw_text", "latency_ms", "tokens_in", "tokens_out", "cost_usd")}
        if r["malformed"]:
            return Decision(error=r["error"] or "malformed (no reason logged)", **usage)
        return Decision(
            decision=r["decision"],
            abstained=r["abstained"],
            refusal_reason=r["refusal_reason"],
            score=r["score"],
            confidence=r["confidence"],
            **usage,
        )
