"""Every table and figure from one call: build, manifest, atomic write, publish.

:func:`build_outputs` computes the registered tables (:data:`TABLES`), draws
the figures (:data:`FIGURES`) and writes a manifest, all in memory, as a
mapping of relative path → bytes::

    manifest.json
    tables.tex         (\\input of every LaTeX table: the paper's one line)
    tables/<name>.csv  tables/<name>.md  tables/<name>.tex (a booktabs table float)
    figures/<name>.png figures/<name>.svg

:func:`write_tables` writes them into a directory atomically (a temporary
directory beside the target, renamed into place), :func:`write_report` renders
the single HTML page and :func:`publish` writes the public outputs after a
guard has checked that no holdout identifier or prompt text appears in any of
them. The same inputs and configuration give byte-identical files: nothing
depends on the clock, the machine's locale or the order of hash maps.
"""

from __future__ import annotations

import contextlib
import hashlib
import html
import json
import os
import platform
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import polars as pl

from .._writes import umask
from ..errors import (
    OutputExistsError,
    PeiraError,
    PeiraValueError,
    PeiraWarning,
    PublicationLeakError,
    warn,
)
from ..integrity.hashes import dataset_hash, results_hash
from ..io import Dataset, atomic_dir, atomic_path
from ._applies import QUIET, empty_reason, figure_reason, flips_reason, table_reason
from ._captions import unobserved_note, unobserved_title
from .figures import (
    FIGURES,
    FORMATS,
    figure_caption,
    figure_title,
    matplotlib_available,
    render_figure,
)
from .html import render_html
from .render import flagged_rows, latex_document_inputs, to_csv, to_latex, to_markdown
from .tables import (
    TABLES,
    ReportConfig,
    ReportContext,
    table_caption,
    table_description,
    table_flag_note,
    table_note,
    table_title,
)

__all__ = [
    "MANIFEST",
    "OutputExistsError",
    "Progress",
    "PublicationLeakError",
    "ReportOutputs",
    "build_outputs",
    "check_publication",
    "latex_table",
    "publish",
    "report_html",
    "write_report",
    "write_tables",
    "write_tree",
]

MANIFEST = "manifest.json"
GENERATORS = ("peira tables", "peira publish")
_DEPENDENCIES = ("polars", "numpy", "scipy", "matplotlib", "pyarrow")

Progress = Callable[[str], None]
"""Receives one line per item being built (``[ 3/22] table calibration``)."""


@dataclass(frozen=True)
class ReportOutputs:
    """What one build produced, in memory.

    Attributes
    ----------
    files
        Relative path → bytes, including ``manifest.json``; sorted by path.
    tables
        Table name → frame.
    figures
        Figure name → format → bytes.
    manifest
        The manifest as a dict.
    not_applicable
        ``{"tables": {name: reason}, "figures": {name: reason}}``: what does not
        apply to the data and why (:mod:`peira.report._applies`), in report order.
    """

    files: dict[str, bytes]
    tables: dict[str, pl.DataFrame] = field(repr=False)
    figures: dict[str, dict[str, bytes]] = field(repr=False)
    manifest: dict[str, Any] = field(repr=False)
    not_applicable: dict[str, dict[str, str]] = field(default_factory=dict, repr=False)


def _version(pkg: str) -> str:
    try:
        return version(pkg)
    except PackageNotFoundError:
        return "not installed"


def _json(obj: Any) -> bytes:
    return (json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


@contextlib.contextmanager
def _once_warnings() -> Iterator[None]:
    """Collect Peira warnings and re-emit each distinct one once, at the end.

    The per-statistic few-clusters warnings of the many interval tables
    collapse into one: the one naming the fewest clusters.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PeiraWarning)
        yield
    few = [w for w in caught if hasattr(w.message, "fewest")]
    if few:
        worst = min(few, key=lambda w: w.message.fewest)  # type: ignore[union-attr]
        caught = [w for w in caught if w is worst or not hasattr(w.message, "fewest")]
    seen: set[tuple[type[Warning], str]] = set()
    for w in caught:
        key = (w.category, str(w.message))
        if issubclass(w.category, PeiraWarning):
            if key in seen:
                continue
            seen.add(key)
            warn(str(w.message), w.category)
        else:  # not ours: pass it on untouched
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def _inputs(ctx: ReportContext) -> dict[str, Any]:
    ds, cases = ctx.dataset, ctx.dataset.cases
    version = ds.version
    if ctx.config.publication:  # a holdout-only dataset_version is holdout metadata
        public = cases.filter(pl.col("split") == "public")["dataset_version"]
        version = "+".join(public.unique().sort().to_list())
    out: dict[str, Any] = {
        "dataset_version": version,
        "dataset_hash": dataset_hash(cases, ds.variants),
        # a log reduced elsewhere (the Spark engine) is not read here: no hash, no count
        "results_hash": results_hash(ctx.responses) if ctx.responses is not None else None,
        "n_cases": cases.height,
        "n_responses": ctx.responses.height if ctx.responses is not None else None,
        "runs": ctx.runs,
    }
    if ctx.config.publication:
        pub = cases.filter(pl.col("split") == "public")
        variants = ds.variants.join(pub.select("case_id"), on="case_id", how="semi")
        out["public_dataset_hash"] = dataset_hash(pub, variants)
        out["n_public_cases"] = pub.height
    return out


def available_tables(ctx: ReportContext) -> list[str]:
    """The tables a context can build, in report order: every one, or for a context of
    run sums (the Spark engine) those that do not need every pair."""
    return [n for n, spec in TABLES.items() if ctx.has_pairs or not spec.pairs]


def omitted(ctx: ReportContext, *, figures: bool = True) -> dict[str, list[str]]:
    """The tables (and figures) a context of run sums leaves out: they need every pair."""
    if ctx.has_pairs:
        return {}
    return {
        "tables": [n for n, spec in TABLES.items() if spec.pairs],
        "figures": [n for n, spec in FIGURES.items() if spec.pairs] if figures else [],
    }


def _manifest(
    ctx: ReportContext,
    generator: str,
    files: Mapping[str, bytes],
    tables: list[str],
    figures: list[str] | None,
    not_applicable: Mapping[str, Mapping[str, str]] | None = None,
) -> dict[str, Any]:
    c = ctx.config
    plans = {
        role: {
            "split": "all" if role == "analysed" and c.split == "all" else (
                c.split if role == "analysed" else role
            ),
            "seed": p.seed,
            "n_resamples": p.n_resamples,
            "unit": p.unit,
            "n_clusters": p.n_clusters,
            "fingerprint": p.fingerprint,
        }
        for role, p in ctx.plans().items()
    }  # fmt: skip
    return {
        "generator": generator,
        "peira_version": _version("peira"),
        "versions": {
            "python": platform.python_version(),
            "peira": _version("peira"),
            **{d: _version(d) for d in _DEPENDENCIES},
        },
        "inputs": _inputs(ctx),
        "config": c.as_dict(),
        "bootstrap": {
            "n_resamples": c.n_resamples,
            "seed": c.seed,
            "unit": c.unit,
            "level": c.level,
            # the interval method of every table: "auto" (docs/spec/uncertainty.md), BCa where
            # the cluster bootstrap carries the row, else the interval the row names
            "method": "auto",
            "plans": plans,
        },
        "tables": tables,
        "figures": figures or [],
        **(
            {
                "omitted": {
                    **omitted(ctx, figures=figures is not None),
                    "reason": "built from the log's run sums (engine "
                    f"{ctx.engine!r}): these need every pair",
                }
            }
            if not ctx.has_pairs
            else {}
        ),
        **(
            {"not_applicable": {k: dict(v) for k, v in not_applicable.items()}}
            if not_applicable and any(not_applicable.values())
            else {}
        ),
        "files": [
            {"path": p, "sha256": hashlib.sha256(b).hexdigest(), "bytes": len(b)}
            for p, b in sorted(files.items())
        ],
    }


def build_outputs(
    ctx: ReportContext,
    *,
    figures: bool = True,
    figure_formats: tuple[str, ...] = FORMATS,
    progress: Progress | None = None,
    generator: str = "peira tables",
) -> ReportOutputs:
    """Build every table (CSV, Markdown, LaTeX), every figure and the manifest in memory.

    Parameters
    ----------
    ctx
        The report context.
    figures
        Draw the figures (needs matplotlib; skipped with a warning when it
        is not installed).
    figure_formats
        Figure formats (default PNG and SVG).
    progress
        Called with one line per item before it is built.
    generator
        Recorded in the manifest (``"peira tables"`` or ``"peira publish"``).

    Returns
    -------
    ReportOutputs
    """
    if figures and not matplotlib_available():
        warn(
            "matplotlib is not installed: figures skipped (pip install 'peira[report]')",
            PeiraWarning,
        )
        figures = False
    table_names = available_tables(ctx)
    skipped = {n: why for n in table_names if (why := table_reason(n, ctx)) is not None}
    table_names = [n for n in table_names if n not in skipped]
    fig_names = [n for n in FIGURES if ctx.has_pairs or not FIGURES[n].pairs] if figures else []
    fig_skipped = {n: why for n in fig_names if (why := figure_reason(n, ctx)) is not None}
    fig_names = [n for n in fig_names if n not in fig_skipped]
    total = len(table_names) + len(fig_names)
    step = 0

    def tell(what: str) -> None:
        nonlocal step
        step += 1
        if progress is not None:
            progress(f"[{step:>{len(str(total))}}/{total}] {what}")

    files: dict[str, bytes] = {}
    frames: dict[str, pl.DataFrame] = {}
    drawn: dict[str, dict[str, bytes]] = {}
    with _once_warnings():
        for name in table_names:
            spec = TABLES[name]
            tell(f"table {name}")
            df = spec.build(ctx)
            why = empty_reason(name, df)
            if why is not None:  # a table of dashes says nothing: the reason says why
                skipped[name] = why
                continue
            frames[name] = df
            dig = spec.decimals(df)
            cap = table_caption(spec, ctx)
            files[f"tables/{name}.csv"] = to_csv(df, digits=dig).encode()
            files[f"tables/{name}.md"] = (
                to_markdown(df, digits=dig) + "\nTable: " + " ".join(cap.split()) + "\n"
            ).encode()
            files[f"tables/{name}.tex"] = latex_table(name, df, ctx).encode()
        for name in fig_names:
            tell(f"figure {name}")
            drawn[name] = render_figure(FIGURES[name], ctx, figure_formats)
            for fmt, data in drawn[name].items():
                files[f"figures/{name}.{fmt}"] = data
    written = list(frames)
    files["tables.tex"] = latex_document_inputs(written).encode()
    left = {
        "tables": {n: skipped[n] for n in TABLES if n in skipped},
        "figures": {n: fig_skipped[n] for n in FIGURES if n in fig_skipped},
    }
    manifest = _manifest(ctx, generator, files, written, fig_names if figures else None, left)
    files[MANIFEST] = _json(manifest)
    return ReportOutputs(dict(sorted(files.items())), frames, drawn, manifest, left)


def latex_table(name: str, df: pl.DataFrame, ctx: ReportContext) -> str:
    """``tables/<name>.tex``: the table as a booktabs float with caption, label
    ``tab:peira-<name>`` and a note of the split, interval method, B and seed."""
    spec = TABLES[name]
    note = table_note(spec, ctx, flag=False)
    if "rank" in df.columns:
        note += " Bold: the rank-1 group (runs no other run beats)"
        note += (
            ", except runs flagged by the holdout divergence check (dagger)."
            if any(flagged_rows(df))
            else "."
        )
    return to_latex(
        df,
        digits=spec.decimals(df),
        caption=(
            f"{table_title(spec, ctx)}. {table_description(spec, ctx)}{table_flag_note(spec, ctx)}"
        ),
        label=f"tab:peira-{name}",
        note=note,
    )


# ---------------------------------------------------------------- writing


def tree_owner(target: Path) -> set[str] | None:
    """The files ``peira tables``/``publish`` wrote in ``target`` (per its manifest), or None."""
    try:
        m = json.loads((target / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not (isinstance(m, dict) and m.get("generator") in GENERATORS):
        return None
    files = m.get("files")
    listed = (
        {f["path"] for f in files if isinstance(f, dict) and isinstance(f.get("path"), str)}
        if isinstance(files, list)
        else set()
    )
    return {MANIFEST, *listed}


def _is_ours(target: Path) -> bool:
    """Whether an existing directory may be replaced: empty, or a previous output of ours."""
    if not target.is_dir():
        return False
    if not any(target.iterdir()):
        return True
    return tree_owner(target) is not None


def write_tree(files: Mapping[str, bytes], out: str | os.PathLike[str]) -> Path:
    """Write ``files`` (relative path → bytes) as the directory ``out``, atomically.

    Everything is written into a temporary directory beside ``out`` and
    swapped into place at once; a failure leaves ``out`` as it was. An
    existing ``out`` is replaced only if it is empty or was written by
    ``peira tables``/``peira publish`` (its ``manifest.json`` says so); files
    in it that the manifest does not list (a user's notes) are kept.

    Raises
    ------
    OutputExistsError
        ``out`` exists and is a file or another directory.
    """
    target = Path(out)
    if target.exists() and not _is_ours(target):
        raise OutputExistsError(
            f"{target}: exists and is not an output directory of peira tables/publish; "
            "choose a new --out directory (it is replaced only when empty or written by peira)"
        )
    with atomic_dir(target, owner=tree_owner, writer="peira tables/publish") as tmp:
        for rel, data in files.items():
            if Path(rel).is_absolute() or ".." in Path(rel).parts:
                raise PeiraValueError(f"bad output path {rel!r}")
            p = tmp / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
            os.chmod(p, 0o666 & ~umask())
    return target


def write_tables(
    ctx: ReportContext,
    out: str | os.PathLike[str],
    *,
    figures: bool = True,
    progress: Progress | None = None,
) -> ReportOutputs:
    """Build every table and figure with the manifest and write them to ``out`` atomically."""
    outputs = build_outputs(ctx, figures=figures, progress=progress)
    write_tree(outputs.files, out)
    return outputs


# ---------------------------------------------------------------- HTML


def report_html(
    ctx: ReportContext,
    *,
    figures: bool = True,
    progress: Progress | None = None,
    diff: tuple[str, str] | None = None,
) -> str:
    """The self-contained, interactive HTML report of a context: the summary first
    (:mod:`peira.report._answers`), tables, PNG figures, the drill-down of the flipped pairs
    of the split analysed and the run-versus-run view; with ``diff`` = (run_a,
    run_b), what changed from the one to the other (:func:`peira.report.changes.diff_section`)."""
    extra: list[tuple[str, str, str, str]] = []
    if diff is not None:  # refused before anything is built
        from .changes import diff_section

        extra.append(diff_section(ctx, *diff))
    outputs = build_outputs(
        ctx,
        figures=figures,
        figure_formats=("png",),
        progress=progress,
        generator="peira publish" if ctx.config.publication else "peira tables",
    )
    c, m = ctx.config, outputs.manifest
    inputs = m["inputs"]
    meta: list[tuple[str, str]] = [
        ("dataset version", str(inputs["dataset_version"])),
        ("dataset hash", str(inputs["dataset_hash"])),
        ("results hash", str(inputs["results_hash"])),
        ("split", c.split + (" (publication: holdout aggregates only)" if c.publication else "")),
        (
            "bootstrap",
            f"{c.level:.0%} {c.unit}-bootstrap intervals, B={c.n_resamples}, seed {c.seed}; "
            "the method of each interval is named per row (interval_method: "
            + (", ".join(_methods_used(ctx)) or "none defined")
            + ")",
        ),
        (
            "head-to-head rule",
            "non-overlapping intervals (overlap = tie; n/a when a run's value is undefined)"
            if c.rule == "ci"
            else "paired difference interval (n/a when a run's value is undefined)",
        ),
    ]
    for role, p in m["bootstrap"]["plans"].items():
        meta.append((f"plan fingerprint ({role})", str(p["fingerprint"])))
    meta.append(("peira", str(m["peira_version"])))
    tables = {
        name: (
            table_title(spec, ctx),
            table_caption(spec, ctx, title=False),
            outputs.tables[name],
            spec.decimals(outputs.tables[name]),
        )
        for name, spec in TABLES.items()
        if name in outputs.tables
    }
    figs = {
        name: (figure_title(spec, ctx), figure_caption(spec, ctx), outputs.figures[name]["png"])
        for name, spec in FIGURES.items()
        if name in outputs.figures
    }
    from .flips import flipped_pairs

    if ctx.responses is None:  # a context of run sums: no pair, no flip to drill into
        raise PeiraError("the HTML report needs the response log (the local engine)")
    left = outputs.not_applicable
    notes = [(TABLES[n].title, why) for n, why in left["tables"].items() if why not in QUIET]
    notes += [(FIGURES[n].title, why) for n, why in left["figures"].items() if why not in QUIET]
    why_no_flips = flips_reason(ctx)
    flips = None
    if why_no_flips is None:
        flips = flipped_pairs(ctx.pairs, ctx.responses, ctx.dataset.variants)
    else:
        notes.append(("Flipped pairs", why_no_flips))
    from ._answers import summary_html
    from ._versus import versus_reason, versus_section

    why_no_versus = versus_reason(ctx)
    versus = versus_section(ctx) if why_no_versus is None else None
    if why_no_versus is not None and len(ctx.runs) > 1:
        notes.append(("Run versus run", why_no_versus))

    return render_html(
        title=f"Peira report: {inputs['dataset_version']}",
        summary=summary_html(ctx, outputs.tables),
        versus=versus,
        flips=flips,
        meta=meta,
        tables=tables,
        figures=figs,
        notes=notes,
        flips_title=unobserved_title("Flipped pairs", ctx.benign_unobserved, len(ctx.runs)),
        flips_note=unobserved_note(ctx.benign_unobserved, len(ctx.runs)),
        extra=extra,
        footer="Generated by peira "
        + str(m["peira_version"])
        + " from the inputs identified by the hashes of the provenance above; "
        "regenerate with `peira report` (same inputs and settings give the same file).",
    )


def _methods_used(ctx: ReportContext) -> list[str]:
    """The interval methods of the ratio intervals actually defined, sorted."""
    ci = ctx.ratio_ci.filter(pl.col("lo").is_not_null())
    return sorted(set(ci["method"].to_list()))


def write_report(
    ctx: ReportContext,
    out: str | os.PathLike[str],
    *,
    figures: bool = True,
    progress: Progress | None = None,
    diff: tuple[str, str] | None = None,
) -> Path:
    """Write the HTML report to ``out`` atomically; returns the path."""
    text = report_html(ctx, figures=figures, progress=progress, diff=diff)
    if ctx.config.publication:  # the same scan as peira publish, before anything is written
        check_publication({Path(out).name: text.encode("utf-8")}, ctx.dataset)
    with atomic_path(out) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(out)


# ---------------------------------------------------------------- publication


def _holdout_secrets(dataset: Dataset) -> tuple[list[str], list[str]]:
    """(identifiers, texts) of the holdout that must never be published."""
    cases = dataset.cases
    hold = cases.filter(pl.col("split") == "holdout")
    public_scen = set(cases.filter(pl.col("split") == "public")["scenario_id"].to_list())
    ids = set(hold["case_id"].to_list())
    ids |= set(hold["scenario_id"].to_list()) - public_scen
    # metadata: a dataset_version only holdout cases carry names the holdout
    public_versions = set(cases.filter(pl.col("split") == "public")["dataset_version"].to_list())
    ids |= set(hold["dataset_version"].to_list()) - public_versions
    v = dataset.variants.join(hold.select("case_id"), on="case_id", how="semi")
    texts = {t for col in ("prompt", "input") for t in v[col].to_list() if t and t.strip()}
    return sorted(i for i in ids if i), sorted(texts)


def _found(text: str, needle: str) -> bool:
    """``needle`` occurs in ``text`` not inside a longer alphanumeric token."""
    start = text.find(needle)
    while start >= 0:
        end = start + len(needle)
        before = text[start - 1] if start else " "
        after = text[end] if end < len(text) else " "
        if not (before.isalnum() and needle[0].isalnum()) and not (
            after.isalnum() and needle[-1].isalnum()
        ):
            return True
        start = text.find(needle, start + 1)
    return False


def check_publication(files: Mapping[str, bytes], dataset: Dataset) -> None:
    """Refuse outputs that name a holdout case or scenario or quote a holdout prompt.

    Every file is searched (text files as UTF-8, others byte for byte; HTML
    and SVG also unescaped) for each holdout case_id, each scenario_id and
    dataset_version used only by holdout cases, and the prompt and input
    text of every holdout variant. Identifiers count
    when they are not part of a longer alphanumeric token.

    Raises
    ------
    PublicationLeakError
        Naming the files and what kind of holdout data they hold (never the
        value itself).
    """
    ids, texts = _holdout_secrets(dataset)
    hits: list[str] = []
    for path, data in sorted(files.items()):
        text = data.decode("utf-8", errors="surrogateescape")
        if path.endswith((".html", ".htm", ".svg")):  # escaped text counts too
            text += "\n" + html.unescape(text)
        kinds = []
        n_ids = sum(_found(text, i) for i in ids)
        if n_ids:
            kinds.append(f"{n_ids} holdout identifier(s)")
        n_txt = sum(t in text for t in texts)
        if n_txt:
            kinds.append(f"{n_txt} holdout prompt text(s)")
        if kinds:
            hits.append(f"{path}: {', '.join(kinds)}")
    if hits:
        raise PublicationLeakError(
            "refusing to publish: holdout data would be disclosed in "
            + "; ".join(hits)
            + ". Publication outputs carry holdout aggregates only; nothing was written."
        )


def publish(
    dataset: Dataset,
    responses: pl.DataFrame,
    out: str | os.PathLike[str],
    config: ReportConfig | None = None,
    *,
    figures: bool = True,
    progress: Progress | None = None,
    pairs: pl.DataFrame | None = None,
) -> ReportOutputs:
    """Write the public leaderboard, tables and figures; the holdout as aggregates only.

    Every table is computed on the public split; the holdout appears only in
    the ``divergence`` table (per-run holdout ASR with its interval and the
    holdout − public difference) and as split totals in the ``census``. No
    key is read. Before anything is written, :func:`check_publication`
    scans every output for holdout identifiers and prompt text.

    Raises
    ------
    PublicationLeakError
        The scan found holdout data (nothing is written).
    """
    cfg = replace(config or ReportConfig(), split="public", publication=True)
    ctx = ReportContext(dataset, responses, cfg, pairs=pairs)
    outputs = build_outputs(ctx, figures=figures, progress=progress, generator="peira publish")
    check_publication(outputs.files, dataset)
    write_tree(outputs.files, out)
    return outputs
