"""The examples ``--help`` shows: one table, by command path.

:data:`EXAMPLES` maps a command's path (``()`` for ``peira`` itself,
``("score",)``, ``("holdout", "blind")``, ``("import", "table")`` for one
format of ``peira import``) to its examples, each a sentence and a command line
a user can paste (a line may continue with ``\\``). Paths are those of a clone
of the repository, run from its root: without ``--dataset`` a command reads
the bundled demo data (``data/demo``); ``data/samples/`` and ``tests/fixtures/``
hold small files in the formats ``peira import`` reads; every output goes
under ``out/``.

Every command has examples, and every example runs as written
(``tests/cli/test_help.py`` runs them all, in this table's order, in one
shell, so an example may read what an earlier one wrote: the ``import``
examples come before the commands that score what they wrote).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["EXAMPLES", "HEADER", "Example"]

#: Said once above every examples block.
HEADER = "from the root of a clone of the repository; no --dataset: the demo data, data/demo"


@dataclass(frozen=True)
class Example:
    """One example: what it does, and the command line that does it.

    ``needs`` names an optional extra the example needs (``"spark"``: ``pip
    install 'peira[spark]'``); the test that runs the examples skips such an
    example, saying why, when the extra is not installed.
    """

    what: str
    line: str
    needs: str = ""


E = Example

_MINE = (
    "peira import table data/samples/results.csv --map case_id=id --map run_id=model \\\n"
    "    --map expected=label --map benign_decision=pred --map attacked_decision=adv_pred \\\n"
    "    --out out/mine"
)

#: Every command's examples, by command path, in the order the test runs them.
EXAMPLES: dict[tuple[str, ...], tuple[Example, ...]] = {
    (): (
        E("rank the demo's runs by robustness, with 95% intervals", "peira leaderboard"),
        E("import your own results table (any CSV/TSV/JSON/Parquet) as a dataset", _MINE),
        E("score it: every metric of every run, with intervals", "peira score --dataset out/mine"),
        E(
            "is m01-robust more robust than m02-fragile? (the paired test)",
            "peira compare m01-robust m02-fragile --dataset out/mine --rule paired",
        ),
        E(
            "one HTML page of every table",
            "peira report --dataset out/mine --out out/mine.html --no-figures",
        ),
    ),
    # ---------------------------------------------------------------- data in
    ("import",): (
        E(
            "reference cases JSONL -> a dataset directory",
            "peira import cases data/samples/cases.jsonl --out out/my-dataset",
        ),
        E(
            "one format's own options, fields and examples",
            "peira import table --help",
        ),
    ),
    ("import", "cases"): (
        E(
            "reference cases JSONL -> a dataset directory",
            "peira import cases data/samples/cases.jsonl --out out/my-dataset",
        ),
    ),
    ("import", "artifact"): (
        E(
            "a reference run artifact -> a response log",
            "peira import artifact data/samples/run.json --out out/run-m01.parquet",
        ),
        E(
            "the same under another run id",
            "peira import artifact data/samples/run.json --run-id mine --out out/mine.parquet",
        ),
    ),
    ("import", "transcript"): (
        E(
            "a reference transcript (one call per line) -> a response log",
            "peira import transcript data/samples/calls.jsonl --out out/calls.parquet",
        ),
        E(
            "score it on the cases of out/my-dataset (peira import cases --help)",
            "peira score --dataset out/my-dataset --responses out/calls.parquet",
        ),
    ),
    ("import", "textattack"): (
        E(
            "TextAttack --log-to-csv files: one run each; shared sentences share cases",
            "peira import textattack data/samples/textattack/bert-mr-greedy.csv.gz \\\n"
            "    data/samples/textattack/lstm-mr-greedy.csv.gz --out out/ta",
        ),
        E(
            "name the run, the labels (the options, in order) and the family",
            "peira import textattack data/samples/textattack/bert-mr-greedy.csv.gz --run bert \\\n"
            "    --labels 0,1 --family movie-reviews --out out/ta-bert",
        ),
        E(
            "the attack summary TextAttack printed, given by name",
            "peira import textattack tests/fixtures/textattack/bert-mr-embedding-greedy.csv.gz \\\n"
            "    --summary tests/fixtures/textattack/bert-mr-embedding-greedy.txt "
            "--out out/ta-summary",
        ),
    ),
    ("import", "jailbreakbench"): (
        E(
            "JailbreakBench artifacts: the attacked arm of each target model",
            "peira import jailbreakbench data/samples/jailbreakbench/*.json.gz --out out/jbb",
        ),
        E(
            "another verdict field as the judge, and the run's id",
            "peira import jailbreakbench "
            "tests/fixtures/jailbreakbench/judges/PAIR-black_box-vicuna-13b-v1.5.json.gz \\\n"
            "    --judge jailbroken_llama_guard1 --run pair-vicuna --out out/jbb-llama-guard",
        ),
        E(
            "two attacks on one model, with every judge's verdicts (judgements.parquet, for "
            "--judge, --judges and 'peira agreement')",
            "peira import jailbreakbench "
            "tests/fixtures/jailbreakbench/judges/GCG-white_box-vicuna-13b-v1.5.json.gz \\\n"
            "    tests/fixtures/jailbreakbench/judges/PAIR-black_box-vicuna-13b-v1.5.json.gz "
            "--out out/jbb-judges",
        ),
    ),
    ("import", "table"): (
        E("a wide table (one row per pair): --map names each field's column", _MINE),
        E(
            "the records under a key of a JSON object (--records), a 0/1 verdict read "
            "through --values, constant fields (--set), the options of every case (--options) "
            "and the source's own figures (--published)",
            "peira import table "
            "tests/fixtures/refusal_direction/jailbreakbench_baseline_evaluations.json \\\n"
            "    --records completions --run qwen-1_8b-chat --map case_id=prompt "
            "--map family=category \\\n"
            "    --map attacked_prompt=prompt --map attacked_raw_text=response \\\n"
            "    --map attacked_decision=is_jailbreak_substring_matching \\\n"
            "    --values attacked_decision=1:comply,0:refuse --set expected=refuse "
            "--options refuse,comply \\\n"
            "    --published tests/fixtures/refusal_direction/published.csv --out out/refusal",
        ),
        E(
            "repeated rows of a question numbered as samples (--sample auto); only the "
            "attacked arm observed (--arms attacked); one family for every case (--family)",
            "peira import table tests/fixtures/gptfuzz/evaluate_q80_q81.csv "
            "--map case_id=question \\\n"
            "    --map attacked_raw_text=Response --map attacked_decision=label \\\n"
            "    --values attacked_decision=1:comply,0:refuse --set expected=refuse "
            "--options refuse,comply \\\n"
            "    --sample auto --arms attacked --family gptfuzz --out out/gptfuzz",
        ),
        E(
            "a long table (one row per call, --map arm=COLUMN) of tab-separated text with "
            "another suffix (--table-format), verdict scores from 0.5 on counting as correct "
            "(--threshold) and who gave them (--verdict-source)",
            "peira import table tests/fixtures/table_long/results_long.txt "
            "--table-format tsv --layout long \\\n"
            "    --map case_id=id --map run_id=model --map expected=label --map arm=arm "
            "--map decision=answer \\\n"
            "    --map verdict_score=judge_score --threshold 0.5 "
            '--verdict-source "exact match" --out out/long',
        ),
        E(
            "several judges' verdicts of each answer (--map verdict:NAME=COLUMN, "
            "verdict:gold for the human labels, all read through --values verdict=...); "
            "--judge names the one whose verdicts are the decisions",
            "peira import table "
            "tests/fixtures/jailbreakbench/judge_comparison/judge-comparison.csv.gz \\\n"
            "    --map case_id=Index --map attacked_prompt=prompt "
            "--map attacked_raw_text=target_response \\\n"
            "    --set expected=refuse --set target=comply --run judge-comparison \\\n"
            "    --map verdict:llama3=llama3_cf --map verdict:gpt4=gpt4_cf "
            "--map verdict:gold=human_majority \\\n"
            "    --values verdict=1:comply,0:refuse --judge gpt4 --out out/judge-comparison",
        ),
        E(
            "the mapping in a JSON file instead of --map FIELD=COLUMN options; "
            "--force replaces the dataset written above",
            'echo \'{"case_id": "id", "run_id": "model", "expected": "label", '
            '"benign_decision": "pred", "attacked_decision": "adv_pred"}\' > out/map.json\n'
            "peira import table data/samples/results.csv --map out/map.json --out out/mine "
            "--force",
        ),
    ),
    ("import", "inspect"): (
        E(
            "Inspect .eval/.json logs: one run per model, clean-only without pairing options; "
            "samples grouped into clusters by a metadata field (--cluster-by)",
            "peira import inspect tests/fixtures/inspect/mc_alpha.eval "
            "tests/fixtures/inspect/mc_beta.eval \\\n"
            "    --cluster-by passage --out out/inspect",
        ),
        E(
            "a benign and an attacked log of one model (each --benign pairs with the "
            "--attacked after it)",
            "peira import inspect --benign tests/fixtures/inspect/suite_benign.eval \\\n"
            "    --attacked tests/fixtures/inspect/suite_attacked.eval --out out/inspect-pairs",
        ),
        E(
            "benign and attacked samples in one log: the metadata field they share "
            "(--pair-by) and the one saying which arm (--arm-field)",
            "peira import inspect tests/fixtures/inspect/pairs_meta.eval --pair-by pair "
            "--arm-field arm \\\n"
            "    --out out/inspect-arms",
        ),
        E(
            "a log with two scorers: --scorer names the verdict",
            "peira import inspect tests/fixtures/inspect/two_scorers.eval --scorer match "
            "--out out/inspect-scorer",
        ),
        E(
            "scores that are dictionaries: --score-key names the verdict",
            "peira import inspect tests/fixtures/inspect_dict/scicode.json "
            '--score-key "Problem Correctness" \\\n'
            "    --out out/scicode",
        ),
    ),
    ("import", "lm-eval"): (
        E(
            "lm-eval --log_samples outputs, one run per model, under one filter",
            "peira import lm-eval tests/fixtures/lm_eval/alpha tests/fixtures/lm_eval/beta "
            "--filter strict-match --out out/lm-eval",
        ),
        E(
            "a perturbed twin task as the attacked arm; the verdict metric named",
            "peira import lm-eval tests/fixtures/lm_eval/alpha "
            "--attacked-task arith_add=arith_add_perturbed \\\n"
            "    --metric acc_norm,exact_match --filter strict-match --out out/lm-eval-pairs",
        ),
    ),
    ("validate",): (
        E(
            "every violation of the data model (exit 1 when there is one)",
            "peira validate data/demo --responses data/demo/responses.parquet",
        ),
        E(
            "an imported dataset (out/mine: peira import table --help), 5 examples per check, "
            "every violation to a file",
            "peira validate out/mine --responses out/mine/responses.parquet --examples 5 \\\n"
            "    --failures-out out/failures.parquet",
        ),
    ),
    ("export",): (
        E(
            "a dataset's public cases as reference JSONL",
            "peira export cases data/demo --out out/demo-cases.jsonl",
        ),
        E(
            "every case of a dataset without holdout cases (out/my-dataset: peira import cases --help)",
            "peira export cases out/my-dataset --split all --out out/cases.jsonl",
        ),
    ),
    ("synth",): (
        E(
            "a new synthetic benchmark: 600 cases, 4 runs",
            "peira synth --out out/bench --cases 600 --models 4 --seed 7",
        ),
        E(
            "three samples per case (repeated sampling)",
            "peira synth --out out/sampled --cases 200 --models 2 --samples 3",
        ),
    ),
    # ---------------------------------------------------------------- scoring
    ("leaderboard",): (
        E("rank the demo's runs by robustness, with 95% intervals", "peira leaderboard"),
        E(
            "the paired rule, Benjamini-Hochberg adjusted, as Markdown",
            "peira leaderboard --rule paired --adjust bh --format markdown",
        ),
        E(
            "rank an imported dataset by benign accuracy, each run on its own pairs (out/mine: "
            "the first example of peira import table --help)",
            "peira leaderboard --dataset out/mine --metric benign_accuracy --support own",
        ),
        E(
            "mark the set of runs that holds the best 3",
            "peira leaderboard --top-k 3 --columns rank,run_id,robustness,lo,hi,top_3",
        ),
        E(
            "by the majority of the judges of judgements.parquet (out/jbb-judges: an example of "
            "peira import jailbreakbench --help)",
            "peira leaderboard --dataset out/jbb-judges --metric asr --judge majority",
        ),
    ),
    ("compare",): (
        E("head to head: which run is more robust", "peira compare m01-robust m08-hill-climber"),
        E("every pair, the paired test, as CSV", "peira compare --rule paired --format csv"),
        E(
            "is m02-fragile's benign accuracy within 2 points of m01-robust's?",
            "peira compare m01-robust m02-fragile --metric benign_accuracy --margin 0.02",
        ),
        E(
            "does the verdict hold under every judge? (out/jbb-judges: an example of "
            "peira import jailbreakbench --help)",
            "peira compare --dataset out/jbb-judges --metric asr --judges all",
        ),
    ),
    ("diff",): (
        E(
            "what changed from a baseline run to a candidate, per family",
            "peira diff m01-robust m07-score-shift --metric benign_accuracy",
        ),
        E(
            "the regressed pairs, both runs' input and output",
            "peira diff m01-robust m07-score-shift --metric benign_accuracy --cases --limit 1",
        ),
    ),
    ("gate",): (
        E(
            "a release gate: the candidate must be more robust and keep benign accuracy",
            "peira gate --baseline m02-fragile --candidate m01-robust "
            "--require robustness:better \\\n"
            "    --guard benign_accuracy:non-inferior:0.02",
        ),
        E(
            "the checks as JUnit XML and a sealed decision record",
            "peira gate --baseline m02-fragile --candidate m01-robust "
            "--require robustness:better \\\n"
            "    --junit out/gate.xml --record out/decision",
        ),
    ),
    ("score",): (
        E("every metric of every demo run, with intervals", "peira score"),
        E("per run x family, as Markdown", "peira score --by family --format markdown"),
        E(
            "the holdout split, cases resampled on their own, percentile intervals",
            "peira score --split holdout --unit case --method percentile",
        ),
        E(
            "an imported dataset beside the figures its source published (out/refusal: an example of "
            "peira import table --help)",
            "peira score --dataset out/refusal --by family",
        ),
        E(
            "by one judge of judgements.parquet (out/jbb-judges: an example of "
            "peira import jailbreakbench --help)",
            "peira score --dataset out/jbb-judges --judge jailbroken_llama_guard1",
        ),
        E(
            "by one judge, the ASR corrected for its error measured on the human labels "
            "(out/judge-comparison: an example of peira import table --help)",
            "peira score --dataset out/judge-comparison --judge gpt4 --correct ppi \\\n"
            "    --columns run_id,asr,asr_corrected,asr_corrected_lo,asr_corrected_hi",
        ),
        E(
            "under the majority of the judges, ASR at both ends of the undetermined verdicts",
            "peira score --dataset out/jbb-judges --judge majority --bounds",
        ),
        E(
            "on Apache Spark (pip install 'peira[spark]')",
            "peira score --engine spark --spark-master 'local[2]' --resamples 1000",
            needs="spark",
        ),
    ),
    ("metrics",): (
        E("what every metric means", "peira metrics"),
        E("as Markdown", "peira metrics --format markdown"),
    ),
    ("agreement",): (
        E(
            "how far the judges of an import agree, Cohen's kappa with intervals (out/jbb-judges: "
            "an example of peira import jailbreakbench --help)",
            "peira agreement --dataset out/jbb-judges",
        ),
        E(
            "two judges and the human labels, per family",
            "peira agreement --dataset out/jbb-judges --judges jailbroken,jailbroken_llama_guard1 "
            "\\\n    --with-gold --by family",
        ),
    ),
    ("flips",): (
        E(
            "the pairs of one run and family whose answer flipped under attack",
            "peira flips --run m02-fragile --family urgency_pressure",
        ),
        E(
            "pairs that abstained under attack only, as blocks side by side",
            "peira flips --reason abstention_flip --side-by-side --limit 2",
        ),
    ),
    # ---------------------------------------------------------------- outputs
    ("tables",): (
        E(
            "every table as CSV, Markdown and LaTeX (leave out --no-figures for the figures too)",
            "peira tables --out out/tables --no-figures",
        ),
    ),
    ("report",): (
        E(
            "one self-contained HTML page: sortable tables, flipped pairs to drill into",
            "peira report --out out/report.html --no-figures",
        ),
        E(
            "the publication view, with what changed from one run to another",
            "peira report --publication --diff m01-robust m07-score-shift "
            "--out out/public.html --no-figures",
        ),
    ),
    ("publish",): (
        E(
            "the public split in full and the holdout as aggregates",
            "peira publish --out out/public --no-figures",
        ),
    ),
    # ---------------------------------------------------------------- running models
    ("run",): (
        E(
            "an offline simulated model over the demo dataset",
            "peira run --adapter peira.adapters:Simulated --dataset data/demo "
            "--out out/run.parquet",
        ),
        E(
            "the calls it would make, and no call",
            "peira run --adapter simulated --dataset data/demo --out out/dry.parquet --dry-run",
        ),
        E(
            "your own model as a subprocess (JSON lines in and out), two at a time",
            'peira run --adapter subprocess --adapter-arg command="python data/samples/my_model.py" '
            "\\\n    --adapter-arg processes=2 --concurrency 2 --dataset data/demo "
            "--out out/my-model.parquet",
        ),
    ),
    ("adapters",): (E("the adapters peira knows", "peira adapters list"),),
    ("adapters", "list"): (
        E("the adapters peira knows", "peira adapters list"),
        E("with each adapter's arguments", "peira adapters list --verbose"),
    ),
    ("adapters", "check"): (
        E("check that an adapter keeps the adapter contract", "peira adapters check simulated"),
    ),
    ("rescore",): (
        E(
            "re-parse the raw outputs with another parser; what changed",
            "peira rescore data/demo/responses.parquet --dataset data/demo --parser options",
        ),
        E(
            "the changed metrics only, and the re-parsed log written",
            "peira rescore data/demo/responses.parquet --dataset data/demo --parser options \\\n"
            "    --report metrics --responses-out out/rescored.parquet",
        ),
    ),
    # ---------------------------------------------------------------- integrity
    ("seal",): (
        E(
            "seal one run's results (a tamper-evident artifact)",
            "peira seal --dataset data/demo --responses data/demo/responses.parquet "
            "--run m01-robust --out out/m01",
        ),
    ),
    ("verify",): (
        E("check a sealed artifact (0 intact, 1 tampered, 2 unreadable)", "peira verify out/m01"),
        E(
            "recompute every metric from the results too",
            "peira verify out/m01 --rederive --dataset data/demo --format json",
        ),
    ),
    ("holdout",): (
        E("a new secret key", "peira holdout keygen --out out/KEY"),
        E(
            "public vs holdout attack success, per run",
            "peira holdout divergence --dataset data/demo --responses data/demo/responses.parquet",
        ),
    ),
    ("holdout", "keygen"): (
        E("a new secret key, mode 0600 (never replaced)", "peira holdout keygen --out out/KEY"),
    ),
    ("holdout", "blind"): (
        E(
            "the holdout cases with pseudonymous ids, for a model to answer",
            "peira holdout blind --dataset data/demo --key-file out/KEY --out out/blinded.parquet",
        ),
    ),
    ("holdout", "unblind"): (
        E(
            "answers to the blinded cases (here: the first option to each) back to a response log",
            "python -c \"import polars as pl; pl.read_parquet('out/blinded.parquet').select("
            "'variant_id', decision=pl.col('options').list.first(), abstained=False, "
            "malformed=False).write_ndjson('out/answers.jsonl')\"\n"
            "peira holdout unblind out/answers.jsonl --dataset data/demo --key-file out/KEY \\\n"
            "    --run-id mine --model mine --model-version 1 --out out/holdout-answers.parquet",
        ),
    ),
    ("holdout", "divergence"): (
        E(
            "public vs holdout attack success, per run",
            "peira holdout divergence --dataset data/demo --responses data/demo/responses.parquet",
        ),
        E(
            "per family, Holm across the board",
            "peira holdout divergence --dataset data/demo --responses data/demo/responses.parquet \\\n"
            "    --by family --flag-family board",
        ),
    ),
    ("plan",): (
        E(
            "how many cases to detect a 3-point ASR difference",
            "peira plan --mde 0.03 --asr 0.15 --eligibility 0.8 --icc 0.1 "
            "--cases-per-cluster 5 --rho 0.3",
        ),
        E(
            "the inputs estimated from a pilot log",
            "peira plan --pilot data/demo/responses.parquet --runs m01-robust m02-fragile "
            "--mde 0.03",
        ),
    ),
}
