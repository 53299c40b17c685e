"""Eval logs at scale: Peira's import of large Inspect and lm-eval logs against the tools'
own readers, wall time and peak memory, each in a fresh process.

Inputs (built into benchmarks/.cache/evallogs, git-ignored):

- ``base.eval``: a multiple-choice log written by Inspect itself (``inspect_ai.eval``
  with its ``mockllm`` provider, ``multiple_choice()`` solver and ``choice()``
  scorer) on 1,221 five-choice questions, the shape of commonsense_qa's
  validation split, every sample with its messages and events as Inspect logs
  them. ``--base LOG`` uses a real log instead.
- ``big_<n>.eval``: the base log's samples replicated under new ids
  (``<id>~<k>``) until ``n`` samples: header, summaries and reductions
  rewritten to match, members zstd-compressed as Inspect writes them.
- ``lm_eval_<rows>/``: a results file and ``--files`` ``samples_<task>_<time>.jsonl``
  files, the rows of tests/fixtures/lm_eval replicated under new ``doc_id``s.

Measured, each in its own child process (wall clock, and peak RSS from
``/usr/bin/time``): ``peira import inspect``; ``inspect_ai.analysis.samples_df`` and
``inspect_ai.log.read_eval_log`` on the same file; ``peira score`` of the
imported dataset; ``peira import lm-eval`` and ``pandas.read_json(lines=True)``
over the same files. The machine's load average is recorded before and after.

Usage::

    python benchmarks/bench_evallogs.py [--sizes 30525,200000] [--lm-rows 1000000]
        [--files 100] [--json-sizes 30525] [--skip-read-eval-log-above 40000]
        [--out benchmarks/results/evallogs]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "benchmarks" / ".cache" / "evallogs"
PY = sys.executable
LETTERS = "ABCDE"


# ------------------------------------------------------------------------ inputs


def build_base(path: Path, n: int = 1221) -> Path:
    """A 1,221-question five-choice log written by Inspect with its mock model."""
    if path.exists():
        return path
    code = f"""
import hashlib, sys
from pathlib import Path
from inspect_ai import Task, eval
from inspect_ai.dataset import Sample
from inspect_ai.model import GenerateConfig, ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import choice
from inspect_ai.solver import multiple_choice

def u(*p):
    return int.from_bytes(hashlib.sha256("|".join(map(str, p)).encode()).digest()[:8], "big") / 2**64

WORDS = "river bank money bed office house garden school store park city farm".split()
samples = []
for i in range({n}):
    w = [WORDS[int(u(i, j) * len(WORDS))] for j in range(12)]
    q = "Where would you most likely find a " + " ".join(w[:6]) + " when the " + " ".join(w[6:]) + "?"
    ch = [f"{{WORDS[int(u(i, 'c', k) * len(WORDS))]}} {{k}}" for k in range(5)]
    samples.append(Sample(id=f"cqa{{i:05d}}", input=q, choices=ch, target="ABCDE"[int(u(i, 't') * 5)],
                          metadata={{"question_concept": w[0]}}))
by_q = {{s.input: s for s in samples}}

def gen(messages, *_):
    text = "\\n".join(m.text for m in messages if m.role == "user")
    s = next(v for k, v in by_q.items() if k in text)
    right = u(s.id, "right") < 0.8
    ans = s.target if right else "ABCDE"[("ABCDE".index(s.target) + 1) % 5]
    out = ModelOutput.from_content(model="mockllm/gpt-4o", content=f"ANSWER: {{ans}}")
    out.usage = ModelUsage(input_tokens=120, output_tokens=3, total_tokens=123)
    return out

task = Task(dataset=samples, solver=multiple_choice(), scorer=choice(), name="commonsense_qa")
model = get_model("mockllm/gpt-4o", custom_outputs=gen, config=GenerateConfig(max_retries=0))
(log,) = eval(task, model=model, log_dir=sys.argv[1], log_format="eval", display="none",
              max_samples=8)
Path(log.location).rename(sys.argv[2])
"""
    tmp = path.parent / "base_tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    subprocess.run([PY, "-c", code, str(tmp), str(path)], check=True)
    shutil.rmtree(tmp, ignore_errors=True)
    return path


def _zstd() -> int:
    if not hasattr(zipfile, "ZIP_ZSTANDARD"):
        import zipfile_zstd  # noqa: F401
    return int(zipfile.ZIP_ZSTANDARD)  # type: ignore[attr-defined]


def replicate(base: Path, n: int, out: Path) -> Path:
    """``base``'s samples replicated under new ids (``<id>~<k>``) up to ``n`` samples."""
    if out.exists():
        return out
    method = _zstd()
    with zipfile.ZipFile(base) as z:
        names = list(dict.fromkeys(z.namelist()))
        header = json.loads(z.read("header.json"))
        members = [(m, json.loads(z.read(m))) for m in names if m.startswith("samples/")]
        summaries = json.loads(z.read("summaries.json")) if "summaries.json" in names else []
        reductions = json.loads(z.read("reductions.json")) if "reductions.json" in names else None
        start = z.read("_journal/start.json") if "_journal/start.json" in names else None
    copies = -(-n // len(members))
    tmp = out.with_suffix(".tmp")
    ids: list[Any] = []
    new_summaries: list[Any] = []
    with zipfile.ZipFile(tmp, "w", compression=method) as zo:
        if start is not None:
            zo.writestr("_journal/start.json", start)
        written = 0
        for k in range(copies):
            for _name, sample in members:
                if written == n:
                    break
                sid = f"{sample['id']}~{k}"
                raw = json.dumps({**sample, "id": sid}, separators=(",", ":"))
                zo.writestr(f"samples/{sid}_epoch_{sample['epoch']}.json", raw)
                ids.append(sid)
                written += 1
        for k in range(copies):
            for s in summaries:
                if len(new_summaries) == n:
                    break
                new_summaries.append({**s, "id": f"{s['id']}~{k}"})
        ds = header["eval"]["dataset"]
        ds["sample_ids"], ds["samples"] = list(dict.fromkeys(ids)), len(set(ids))
        for sc in (header.get("results") or {}).get("scores", []):
            sc["scored_samples"] = n
        header["results"] and header["results"].update(total_samples=n, completed_samples=n)
        zo.writestr("summaries.json", json.dumps(new_summaries))
        if reductions is not None:
            for r in reductions:
                r["samples"] = [
                    {**s, "sample_id": f"{s['sample_id']}~{k}"}
                    for k in range(copies)
                    for s in r["samples"]
                ][:n]
            zo.writestr("reductions.json", json.dumps(reductions))
        zo.writestr("header.json", json.dumps(header))
    tmp.rename(out)
    return out


def to_json(src: Path, out: Path) -> Path:
    """The ``.eval`` log ``src`` as Inspect's ``.json`` format (one document, the header's
    fields then ``samples``), written one sample at a time."""
    if out.exists():
        return out
    _zstd()
    with zipfile.ZipFile(src) as z, out.with_suffix(".tmp").open("w") as fh:
        header = json.loads(z.read("header.json"))
        fh.write("{")
        for k, v in header.items():
            fh.write(f"{json.dumps(k)}:{json.dumps(v)},")
        fh.write('"samples":[')
        first = True
        for name in z.namelist():
            if name.startswith("samples/"):
                fh.write(("" if first else ",") + z.read(name).decode())
                first = False
        fh.write("]}")
    out.with_suffix(".tmp").rename(out)
    return out


def build_lm_eval(rows: int, files: int, out: Path) -> Path:
    """``files`` sample files of ``rows // files`` rows each (the fixture's rows, new doc_ids)
    and a results file naming each file's task."""
    if out.exists():
        return out
    src = ROOT / "tests" / "fixtures" / "lm_eval" / "alpha"
    (res,) = sorted(src.rglob("results_*.json"))
    stamp = res.stem.removeprefix("results_")
    sample_files = sorted(src.rglob(f"samples_*_{stamp}.jsonl"))
    proto: list[tuple[str, list[dict[str, Any]]]] = []
    for f in sample_files:
        task = f.name.removeprefix("samples_").removesuffix(f"_{stamp}.jsonl")
        lines = [json.loads(line) for line in f.read_text().splitlines() if line]
        if len({r.get("filter", "none") for r in lines}) == 1:  # one filter: no --filter
            proto.append((task, lines))
    results = json.loads(res.read_text())
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    run_dir = tmp / res.parent.relative_to(src)
    run_dir.mkdir(parents=True)
    per_file = rows // files
    new_results = {k: v for k, v in results.items()}
    for key in ("results", "configs", "versions", "n-shot", "higher_is_better", "n-samples"):
        if key in results:
            new_results[key] = {}
    new_results.pop("groups", None)
    new_results.pop("group_subtasks", None)
    for i in range(files):
        task, lines = proto[i % len(proto)]
        name = f"{task}_x{i:03d}"
        with (run_dir / f"samples_{name}_{stamp}.jsonl").open("w") as fh:
            for j in range(per_file):
                row = dict(lines[j % len(lines)])
                row["doc_id"] = j
                row["doc_hash"] = f"{row.get('doc_hash', '')}{j}"
                fh.write(json.dumps(row) + "\n")
        for key in ("results", "configs", "versions", "n-shot", "higher_is_better", "n-samples"):
            if key in results and task in results[key]:
                v = results[key][task]
                if key == "configs" and isinstance(v, dict):
                    v = {**v, "task": name}
                if key == "results" and isinstance(v, dict):
                    v = {**v, "alias": name}
                if key == "n-samples" and isinstance(v, dict):
                    v = {"original": per_file, "effective": per_file}
                new_results[key][name] = v
    (run_dir / res.name).write_text(json.dumps(new_results))
    tmp.rename(out)
    return out


# ----------------------------------------------------------------------- timing


def measure(argv: list[str], label: str) -> dict[str, Any]:
    """Wall time and peak RSS of a fresh process running ``argv``, under ``/usr/bin/time``:
    a child forked from this process would inherit its high-water mark across exec, which
    would hide any peak below this process's own."""
    fmt = "PEAK_KB=%M"
    t0 = time.perf_counter()
    proc = subprocess.run(["/usr/bin/time", "-f", fmt, *argv], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    wall = time.perf_counter() - t0
    err = proc.stderr.decode(errors="replace").strip().splitlines()
    kb = next((int(x.split("=")[1]) for x in reversed(err) if x.startswith("PEAK_KB=")), 0)
    code = proc.returncode
    row = {"what": label, "wall_s": round(wall, 2), "peak_rss_mb": round(kb / 1024, 1),
           "exit": code}  # fmt: skip
    if code != 0:
        row["stderr"] = [x for x in err if not x.startswith("PEAK_KB=")][-1:]
    print(json.dumps(row), flush=True)
    return row


def _py(code: str) -> list[str]:
    return [PY, "-c", code]


def peira_cmd(*args: str) -> list[str]:
    return [PY, "-m", "peira", *args]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="30525,200000")
    ap.add_argument("--lm-rows", type=int, default=1_000_000)
    ap.add_argument("--files", type=int, default=100)
    ap.add_argument("--json-sizes", default="30525")
    ap.add_argument("--base", type=Path, default=None)
    ap.add_argument("--skip-read-eval-log-above", type=int, default=40_000)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "evallogs")
    ap.add_argument("--only", choices=("inspect", "lm-eval", "all"), default="all")
    args = ap.parse_args()
    CACHE.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    rows: list[dict[str, Any]] = []
    sizes = [int(s) for s in args.sizes.split(",") if s]
    json_sizes = [int(s) for s in args.json_sizes.split(",") if s]
    if args.only in ("inspect", "all"):
        base = args.base or build_base(CACHE / "base.eval")
        for n in sizes:
            log = replicate(base, n, CACHE / f"big_{n}.eval")
            mb = log.stat().st_size / 1e6
            out = CACHE / f"ds_{n}"
            shutil.rmtree(out, ignore_errors=True)
            tag = f"inspect .eval, {n:,} samples, {mb:.0f} MB"
            r = measure(peira_cmd("import", "inspect", str(log), "--out", str(out)),
                        "peira import inspect")  # fmt: skip
            rows.append({"input": tag, **r})
            r = measure(peira_cmd("score", "--dataset", str(out), "--format", "json"),
                        "peira score (the imported dataset)")  # fmt: skip
            rows.append({"input": tag, **r})
            both = rows[-2]["wall_s"] + rows[-1]["wall_s"]
            rows.append({"input": tag, "what": "import + score, end to end", "wall_s": round(both, 2),
                         "peak_rss_mb": max(rows[-2]["peak_rss_mb"], rows[-1]["peak_rss_mb"]),
                         "exit": max(rows[-2]["exit"], rows[-1]["exit"])})  # fmt: skip
            code = f"from inspect_ai.analysis import samples_df; samples_df({str(log)!r})"
            rows.append({"input": tag, **measure(_py(code), "inspect_ai.analysis.samples_df")})
            if n <= args.skip_read_eval_log_above:
                code = f"from inspect_ai.log import read_eval_log; read_eval_log({str(log)!r})"
                rows.append({"input": tag, **measure(_py(code), "inspect_ai read_eval_log")})
        for n in [s for s in json_sizes]:
            log = to_json(CACHE / f"big_{n}.eval", CACHE / f"big_{n}.json")
            mb = log.stat().st_size / 1e6
            out = CACHE / f"dsj_{n}"
            shutil.rmtree(out, ignore_errors=True)
            tag = f"inspect .json, {n:,} samples, {mb:.0f} MB"
            r = measure(peira_cmd("import", "inspect", str(log), "--out", str(out)),
                        "peira import inspect")  # fmt: skip
            rows.append({"input": tag, **r})
            code = f"from inspect_ai.log import read_eval_log; read_eval_log({str(log)!r})"
            rows.append({"input": tag, **measure(_py(code), "inspect_ai read_eval_log")})
    if args.only in ("lm-eval", "all") and args.lm_rows:
        d = build_lm_eval(args.lm_rows, args.files, CACHE / f"lm_eval_{args.lm_rows}")
        files = sorted(str(p) for p in d.rglob("samples_*.jsonl"))
        tag = f"lm-eval, {args.lm_rows:,} rows over {len(files)} files"
        out = CACHE / "ds_lm_eval"
        shutil.rmtree(out, ignore_errors=True)
        r = measure(peira_cmd("import", "lm-eval", str(d), "--out", str(out)),
                    "peira import lm-eval")  # fmt: skip
        rows.append({"input": tag, **r})
        lst = CACHE / "lm_files.json"
        lst.write_text(json.dumps(files))
        code = (
            f"import json, pandas as pd; fs = json.load(open({str(lst)!r})); "
            "[pd.read_json(f, lines=True) for f in fs]"
        )
        rows.append({"input": tag, **measure(_py(code), "pandas.read_json(lines=True)")})
    load_after = os.getloadavg()
    write(rows, args.out, load_before, load_after)


def write(rows: list[dict[str, Any]], out: Path, before: Any, after: Any) -> None:
    import importlib.metadata as md

    meta = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "load_before": [round(x, 2) for x in before],
        "load_after": [round(x, 2) for x in after],
        "inspect_ai": md.version("inspect_ai"),
        "pandas": md.version("pandas"),
        "polars": md.version("polars"),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    lines = [
        "# Eval logs at scale",
        "",
        "`python benchmarks/bench_evallogs.py` (see its docstring for the inputs). Each row",
        "is a fresh process: wall clock and peak RSS (`/usr/bin/time`), Python start and imports",
        "included.",
        "",
        f"Machine: {meta['machine']}; load average before {meta['load_before']}, after "
        f"{meta['load_after']}; inspect_ai {meta['inspect_ai']}, pandas {meta['pandas']}, "
        f"polars {meta['polars']}.",
        "",
        "| input | what | wall (s) | peak RSS (MB) | exit |",
        "|---|---|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['input']} | {r['what']} | {r['wall_s']} | {r['peak_rss_mb']} | "
                     f"{r['exit']} |")  # fmt: skip
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
