"""Ranking quality against LightGBM on data that favours trees: the shipped entry points at their shipped defaults,
launched as users launch them on LETOR text, beside LightGBM lambdarank trained in the same run on the same text.

    python -m benchmarks.ranking.ranking_quality --size cpu   # minutes on 2 CPU cores: 1,000 training queries
    python -m benchmarks.ranking.ranking_quality --size gpu   # a GPU host: 10,000 training queries (MSLR-WEB10K-sized)
    python -m benchmarks.ranking.ranking_quality --size gpu --queries 31531   # MSLR-WEB30K-sized

Datasets (`--datasets`, comma-separated):
  search        ranker.data.synthetic_search: heavy-tailed counts, binary flags, relevance from threshold rules and
                their interactions, label noise, graded labels 0-4, MSLR-like query sizes; a held-out test file of a
                fifth as many queries (another seed, the same problem)
  trees         ranker.data.synthetic_trees: heavy-tailed, uniform and binary features, relevance a sum of many
                small axis-aligned trees over some of them plus noise, graded 0-4 within each query, MSLR-like query
                sizes: data shaped for gradient-boosted trees; a held-out test file as for search
  tanh          ranker.data.synthetic, the project's other generator (smooth hidden function, which favours an MLP),
                as benchmarks.ranking.time_to_model writes it
  letor-sample  the LETOR sample that ships with the tests (LightGBM's rank.train example): a fifth of its queries,
                drawn with seed 0, held out whole as the test file
Runs on each (`--runs`):
  native        training_code/train_ddp.py, shipped defaults, `--test FILE` (torchrun over `--gpus` processes)
  lightning     training_code/train_lightning.py, the same
  previous      train_ddp.py with the pipeline's former defaults (raw features without per-feature embeddings,
                ListNet loss on softmax(label), 10 epochs of 16 queries per batch, width 256, learning rate 0.001
                with a cosine over the 10 epochs: PREVIOUS_RECIPE), as a baseline
  lightgbm      benchmarks/baselines/lightgbm_lambdarank.py: LightGBM lambdarank with the usual MSLR settings, every
                core (`--threads`), on the same text read by the project's parser, in a process of its own, trained
                to convergence: on the trainers' training queries, until `--lightgbm-patience` rounds in a row (50)
                have not beaten its best NDCG@10 on their validation queries, at most `--lightgbm-rounds` (5,000);
                `--lightgbm-patience 0` trains all rounds on every training query instead; `--lightgbm-python` runs
                it with another interpreter (a small environment of its own holding LightGBM and NumPy)
  `--variants`  an entry point with some flags changed from the shipped defaults, one run per variant, to choose
                defaults by measurement: `--variants "bins=8,loss=graded_listwise;lightning:batch-size=64"`
                (variants separated by `;`, each a comma-separated list of flag=value, run by train_ddp.py or, after
                `lightning:`, by train_lightning.py); `--patience-replay 1,2,3,5,10` reads what each patience
                would have cost and bought off the validation curve of each variant with `early-stopping=0`
The trainers hold a fifth of the training queries out for validation (model selection), and LightGBM holds out the
same ones. Test NDCG@10 is scikit-learn's definition (ranker.model.metrics), on the same test file for every run. Launch
to model is each run's wall time from launch to its model on disk, text parsing included; time to best is launch to
the validation that found the weights it exports (an entry point's epoch, LightGBM's round), which a run stopping
early learns only a patience later. A second table gives each run's curve: the best validation NDCG@10 (the model it
would export) at doubling times since launch. LightGBM is a
benchmark-only peer: `pip install lightgbm==4.7.0` (benchmarks/ranking/requirements-ranking-quality.txt). Table on
stdout; section `ranking-quality-<size>` in docs/benchmarks.md.

A call cut short (a machine's time limit: the GPU size takes about ten minutes on 16 cores) resumes: run it again
with the same `--work DIR`. The data written with the same sizes and every run that finished are kept there, so only
the runs still missing are launched, and the table holds them all.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import numpy as np
import torch
from ranker.config import hardware_defaults
from ranker.data import synthetic, synthetic_search, synthetic_trees
from ranker.data.channels import read_letor_file, split_queries

from benchmarks.harness.machine import SAFE_NCCL_ENV, machine_description
from benchmarks.harness.models import SHIPPED_MODEL, model_line
from benchmarks.harness.project_code import LETOR_SAMPLE
from benchmarks.harness.report import BENCHMARKS_DOC, markdown_table, measured_at, provenance, write_section
from benchmarks.ranking.time_to_model import ENTRY_POINTS, Run, generate_dataset, run_lightgbm, run_project

SIZES = {"cpu": {"queries": 1_000, "docs_per_query": 20, "features": 136},
         "gpu": {"queries": 10_000, "docs_per_query": 120, "features": 136}}
# What a pipeline job ran before these defaults: the scripts' former defaults under the stack's former
# default_hyperparameters (10 epochs, ListNet).
PREVIOUS_RECIPE = ("--encoding", "none", "--embedding-width", "0", "--loss", "listwise", "--epochs", "10",
                   "--batch-size", "16", "--width", "256", "--learning-rate", "0.001", "--lr-decay-patience", "0")
# In the label of a variant trained without early stopping, whose curve --patience-replay reads.
NO_PATIENCE = "--early-stopping 0"
RUN_LABELS = {"native": "train_ddp.py, shipped defaults", "lightning": "train_lightning.py, shipped defaults",
              "previous": "train_ddp.py, former pipeline defaults"}


# The generated datasets with a held-out test file drawn from the same problem with another seed.
GENERATORS = {"search": synthetic_search.generate, "trees": synthetic_trees.generate}


def write_generated(folder: Path, dataset: str, queries: int, docs_per_query: int,
                    features: int) -> tuple[Path, Path]:
    """`dataset`'s training file (seed 0) and a test file of a fifth as many queries (seed 1)."""
    generate = GENERATORS[dataset]
    train = synthetic.write_letor(generate(queries, docs_per_query, features, seed=0), folder, with_qid=True,
                                  name="rank.train")
    test = synthetic.write_letor(generate(max(2, queries // 5), docs_per_query, features, seed=1), folder,
                                 with_qid=True, name="rank.test")
    return train, test


def write_letor_sample(folder: Path, sample: Path) -> tuple[Path, Path]:
    """The sample's rank.train split into whole training and test queries (a fifth held out, seed 0)."""
    data = read_letor_file(sample / "rank.train")
    train, test = split_queries(data, 0.2, seed=0)
    return (synthetic.write_letor(train, folder, with_qid=True, name="rank.train"),
            synthetic.write_letor(test, folder, with_qid=True, name="rank.test"))


def variant_flags(variant: str) -> tuple[str, tuple[str, ...]]:
    """`"bins=8,loss=graded_listwise"` -> `("native", ("--bins", "8", "--loss", "graded_listwise"))`; a
    `lightning:` prefix names the Lightning entry point."""
    entry, colon, assignments = variant.strip().rpartition(":")
    entry = entry.strip() if colon else "native"
    if entry not in ENTRY_POINTS:
        raise ValueError(f"--variants: {entry!r} is not an entry point; prefix a variant with one of "
                         f"{', '.join(f'{name}:' for name in ENTRY_POINTS)} or with none for native")
    flags = []
    for assignment in assignments.split(","):
        name, equals, value = assignment.strip().partition("=")
        if not equals or not name or not value:
            raise ValueError(f"--variants: {assignment!r} is not flag=value; write e.g. bins=8,loss=graded_listwise")
        flags += [f"--{name.strip()}", value.strip()]
    return entry, tuple(flags)


def written_data(folder: Path, recipe: dict, write: Callable[[], tuple[Path, Path]]) -> tuple[Path, Path]:
    """The dataset's training and test files: those already in `folder` when they were written from the same
    `recipe` (a resumed call), else freshly written. The writers are seeded, so the recipe fixes the data: runs
    recorded under the same recipe (on another machine, their records carried over without the data) are kept, and
    a new recipe forgets them."""
    stamp, train, test = folder / "recipe.json", folder / "rank.train", folder / "rank.test"
    same_recipe = stamp.exists() and json.loads(stamp.read_text()) == recipe
    if same_recipe and train.exists() and test.exists():
        print(f"[{folder.name}] reusing the data in {folder}", flush=True)
        return train, test
    if not same_recipe:
        shutil.rmtree(folder / "results", ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    paths = write()
    stamp.write_text(json.dumps(recipe))
    print(f"[{folder.name}] data written in {time.perf_counter() - started:.0f} s", flush=True)
    return paths


def recorded(record: Path, launch: Callable[[], tuple[Run, str]]) -> tuple[Run, str]:
    """A run's result as an earlier call recorded it in `record`, its note saying when, else `launch()`'s, recorded
    there when it finished (a failed run, without events, is tried again next time)."""
    if record.exists():
        saved = json.loads(record.read_text())
        return Run(**saved["run"]), f"{saved['note']}; recorded by an earlier call, {saved['date']}"
    run, note = launch()
    if run.events:
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_text(json.dumps({"run": dataclasses.asdict(run), "note": note, "date": measured_at()["date"]}))
    return run, note


def exported_step(run_folder: Path) -> str:
    metrics = json.loads((run_folder / "model" / "metrics.json").read_text())
    return f"step {metrics['exported_step']} (epoch {metrics['exported_epoch']})"


def run_dataset(dataset: str, train: Path, test: Path, args: argparse.Namespace, work: Path,
                env: dict[str, str]) -> list[tuple[Run, str]]:
    """Every chosen run on one dataset, each with a note (where its exported weights come from); runs recorded in
    the dataset's folder by an earlier call on the same data are read back, not run again."""
    def trainer(label: str, entry_point: str, flags: Sequence[str], slug: str) -> tuple[Run, str]:
        print(f"[{dataset}] running {label} ...", flush=True)
        run = run_project(entry_point, args.gpus, train, test, None, work, env, flags=flags, name=f"{dataset}-{slug}")
        run.name = label
        return run, f"exports {exported_step(work / f'{dataset}-{slug}-{args.gpus}')}"

    def lightgbm() -> tuple[Run, str]:
        print(f"[{dataset}] running LightGBM ...", flush=True)
        run = run_lightgbm(train, test, args.lightgbm_rounds, work, env, args.threads, name=f"{dataset}-lightgbm",
                           early_stopping=args.lightgbm_patience, python=args.lightgbm_python)
        return run, run.note

    launchers = {name: partial(trainer, label, ENTRY_POINTS.get(name, ENTRY_POINTS["native"]),
                               PREVIOUS_RECIPE if name == "previous" else (), name)
                 for name, label in RUN_LABELS.items() if name in args.runs}
    for entry, flags in args.variants:
        slug = f"variant{'' if entry == 'native' else '-' + entry}" + re.sub(r"[^A-Za-z0-9.]+", "-",
                                                                               " ".join(flags)).rstrip("-")
        launchers[slug] = partial(trainer, f"{ENTRY_POINTS[entry]}, shipped defaults but `{' '.join(flags)}`",
                                  ENTRY_POINTS[entry], flags, slug)
    if "lightgbm" in args.runs:
        launchers["lightgbm"] = lightgbm
    # The peer runs first: a call cut short by a machine's time limit keeps what every row is compared with.
    order = sorted(launchers, key=lambda name: name != "lightgbm")
    results = {name: recorded(work / dataset / "results" / f"{name}-{args.gpus}.json", launchers[name])
               for name in order}
    return [results[name] for name in launchers]


def curve_marks(runs: Sequence[Run]) -> list[float]:
    """Doubling times since launch, from 2 s to the first past the longest run."""
    marks = [2.0]
    while marks[-1] < max(run.wall for run in runs):
        marks.append(marks[-1] * 2)
    return marks


def best_by(run: Run, seconds: float) -> str:
    """The best validation NDCG@10 logged by `seconds` after launch: the model the run would export then."""
    scores = [score for at, score in run.curve if at <= seconds]
    return f"{max(scores):.4f}" if scores else "-"


def patience_replay(run: Run, patiences: Sequence[int]) -> list[list[str]]:
    """What each patience would have cost and bought on `run`, trained with none: a run with the same flags and seed
    trains the same weights up to its stop, so its stop and export can be read off `run`'s validation curve. Rows:
    patience, epochs validated, epoch exported, its validation NDCG@10, seconds since launch at the stopping
    validation."""
    rows = []
    for patience in patiences:
        best, stale, stop = 0, 0, None
        for index, (_, score) in enumerate(run.curve):
            if score > run.curve[best][1]:
                best, stale = index, 0
            elif index:
                stale += 1
            if stale == patience:
                stop = index
                break
        rows.append([str(patience), "never (the cap)" if stop is None else str(stop + 1), str(best + 1),
                     f"{run.curve[best][1]:.4f}", "-" if stop is None else f"{run.curve[stop][0]:.1f}"])
    return rows


def render(tables: dict[str, list[tuple[Run, str]]], descriptions: dict[str, str], args: argparse.Namespace,
           machine: str) -> str:
    headers = ["dataset", "run", "test NDCG@10", "vs LightGBM", "best validation NDCG@10", "time to best (s)",
               "launch to model (s)", "training (s)", "fixed cost (s)", "notes"]
    rows, curves, replays = [], [], []
    for dataset, results in tables.items():
        peer = next((run.ndcg_at_10 for run, _ in results if run.name.startswith("LightGBM") and run.events), None)
        for run, note in results:
            if not run.events:
                rows.append([dataset, run.name, *["-"] * 7, note])
                continue
            delta = f"{run.ndcg_at_10 - peer:+.4f}" if peer is not None else "-"
            best, fixed = run.best_validation, run.fixed_cost
            rows.append([dataset, run.name, f"{run.ndcg_at_10:.4f}", delta, f"{best[1]:.4f}" if best else "-",
                         f"{best[0]:.1f}" if best else "-", f"{run.wall:.1f}", f"{run.phases()['training']:.1f}",
                         f"{fixed:.1f}" if fixed is not None else "-", note])
        for run, _ in results:
            if args.patience_replay and run.events and NO_PATIENCE in run.name:
                replays.append(f"{dataset}, {run.name}:\n\n" + markdown_table(
                    ["patience", "stops after epoch", "exports epoch", "its validation NDCG@10",
                     "stopping validation (s)"], patience_replay(run, args.patience_replay)))
        finished = [run for run, _ in results if run.events and run.curve]
        if finished:
            marks = curve_marks(finished)
            curves.append(markdown_table([dataset, *(f"{mark:g} s" for mark in marks)],
                                         [[run.name, *(best_by(run, mark) for mark in marks)] for run in finished]))
    data_lines = "\n".join(f"- {dataset}: {text}" for dataset, text in descriptions.items())
    peer_line = (f"the trainers' training queries, stopped after {args.lightgbm_patience} rounds without a better "
                 f"NDCG@10 on their validation queries (at most {args.lightgbm_rounds:,})" if args.lightgbm_patience
                 else f"all training queries, {args.lightgbm_rounds:,} rounds")
    curve_text = ("\n\nBest validation NDCG@10 by time since launch (the model each run would export then; validation "
                  "queries and metric shared by all runs):\n\n" + "\n\n".join(curves)) if curves else ""
    shipped = hardware_defaults(args.device).config()
    defaults, width = shipped.train, shipped.model.width
    batch = f"{defaults.batch_size} queries a step" if defaults.batch_size else "the batch chosen from the queries"
    if replays:
        curve_text += ("\n\nWhat each patience costs and buys, read off a run trained without early stopping (a run with "
                       "the same flags and seed trains the same weights up to its stop):\n\n" + "\n\n".join(replays))
    return (f"{provenance(machine=machine)}\n{model_line([SHIPPED_MODEL])}\n- The trainers' shipped defaults on "
            f"{shipped.defaults.name.upper()}: width {width}, {batch}, up to "
            f"{defaults.epochs} epochs, early stopping after {defaults.early_stopping} validations without a better "
            f"NDCG@10, the learning rate times {defaults.lr_decay_factor} after each {defaults.lr_decay_patience} "
            f"validations in a row without one\n{data_lines}\n"
            f"- Trainers: one process per {'GPU' if args.device == 'cuda' else 'CPU'} x {args.gpus}, their shipped "
            "defaults and `--test FILE`; a fifth of the training queries held out for validation, which picks the "
            f"exported weights. LightGBM: {peer_line}, the usual MSLR settings. CPU threads per run: "
            f"{args.threads or 'every core'}. Fixed cost: launch to the first step plus the last step to the model "
            "exported, from the entry point's `timeline:` lines\n\n"
            f"{markdown_table(headers, rows)}{curve_text}\n")


def add_size_arguments(parser: argparse.ArgumentParser) -> None:
    """`--size` and what may change it: the generated datasets' queries, documents per query and features."""
    parser.add_argument("--size", choices=tuple(SIZES), default="gpu" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--queries", type=int, help="training queries of the generated datasets (default: the size's)")
    parser.add_argument("--docs-per-query", type=int, help="typical documents per generated query")
    parser.add_argument("--features", type=int, help="features of the generated datasets")


def chosen_size(args: argparse.Namespace) -> dict[str, int]:
    return {name: getattr(args, name) or default for name, default in SIZES[args.size].items()}


def describe(path: Path, test: Path) -> str:
    train, held_out = read_letor_file(path), read_letor_file(test)
    sizes = np.diff(train.query_offsets)
    return (f"{train.num_queries:,} training queries ({len(train.labels):,} documents, {sizes.min()}-{sizes.max()} per "
            f"query, mean {sizes.mean():.0f}), {held_out.num_queries:,} test queries, {train.num_features} features, "
            f"{path.stat().st_size / 1e6:,.1f} MB of training text")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_size_arguments(parser)
    parser.add_argument("--datasets", default="search,tanh,letor-sample", help="comma-separated, see above")
    parser.add_argument("--runs", default="native,lightning,previous,lightgbm", help="comma-separated, see above")
    parser.add_argument("--variants", default="", help="train_ddp.py runs with flags changed, see above")
    parser.add_argument("--patience-replay", default="",
                        help="comma-separated patiences (e.g. 1,2,3,5,10) to replay on each run with "
                             "`early-stopping=0` among its variants")
    parser.add_argument("--gpus", type=int, default=1, help="processes per trainer (one per GPU)")
    parser.add_argument("--lightgbm-rounds", type=int, default=5000, help="LightGBM's rounds, or their cap")
    parser.add_argument("--lightgbm-patience", type=int, default=50,
                        help="LightGBM's rounds without a better validation NDCG@10 before stopping; 0: every round")
    parser.add_argument("--lightgbm-python", default=sys.executable,
                        help="the interpreter that runs LightGBM (default: this one); it needs lightgbm and numpy")
    parser.add_argument("--threads", type=int, default=None,
                        help="CPU threads for every run alike (trainers' OMP_NUM_THREADS, LightGBM's num_threads); "
                             "default: every core. On a machine shared with other work, 1 avoids threads spinning "
                             "against each other")
    parser.add_argument("--letor-sample", type=Path, default=LETOR_SAMPLE, help="folder holding the sample's rank.train")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--work", type=Path, default=None, help="folder for the data, logs and models (default: temp)")
    parser.add_argument("--doc", type=Path, default=BENCHMARKS_DOC)
    parser.add_argument("--section", help="docs/benchmarks.md section to write (default: ranking-quality-SIZE)")
    parser.add_argument("--title", help="the section's title (default: the size, the datasets, any variants)")
    args = parser.parse_args(argv)
    size = chosen_size(args)
    args.runs = args.runs.split(",")
    args.patience_replay = [int(patience) for patience in args.patience_replay.split(",") if patience.strip()]
    try:
        args.variants = [variant_flags(variant) for variant in args.variants.split(";") if variant.strip()]
    except ValueError as error:
        parser.error(str(error))
    env = {**os.environ, **SAFE_NCCL_ENV, "PYTHONUNBUFFERED": "1"}
    if args.device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    if args.threads:
        env["OMP_NUM_THREADS"] = str(args.threads)

    tables, descriptions = {}, {}
    with tempfile.TemporaryDirectory(prefix="ranking-quality-") as temporary:
        work = args.work or Path(temporary)
        for dataset in args.datasets.split(","):
            folder, recipe = work / dataset, {"dataset": dataset, **size}
            shape = (size["queries"], size["docs_per_query"], size["features"])
            if dataset in GENERATORS:
                train, test = written_data(folder, recipe, lambda: write_generated(folder, dataset, *shape))
            elif dataset == "tanh":
                train, test = written_data(folder, recipe, lambda: generate_dataset(folder, *shape))
            elif dataset == "letor-sample":
                train, test = written_data(folder, {"dataset": dataset, "sample": str(args.letor_sample)},
                                           lambda: write_letor_sample(folder, args.letor_sample))
            else:
                parser.error(f"--datasets: unknown dataset {dataset!r}: use search, trees, tanh or letor-sample")
            descriptions[dataset] = describe(train, test)
            tables[dataset] = run_dataset(dataset, train, test, args, work, env)

    body = render(tables, descriptions, args, machine_description(args.device))
    print(body)
    write_section(args.section or f"ranking-quality-{args.size}",
                  args.title or f"Ranking quality against LightGBM ({args.size.upper()} size: {args.datasets}"
                  f"{', with variants of the defaults' if args.variants else ''})", body, doc=args.doc)
    print(f"written to {args.doc}")


if __name__ == "__main__":
    sys.exit(main())
