"""Time to model on MSLR-WEB30K-shaped LETOR text: the shipped entry points as a job runs them, beside the tools a
ranking engineer would use instead, launch to model written, with NDCG@10 on held-out queries.

    python -m benchmarks.ranking.time_to_model [--queries 31531] [--epochs 10] [--gpus 1,2]          # a GPU host
    python -m benchmarks.ranking.time_to_model --device cpu --queries 60 --docs-per-query 8 --features 12 --epochs 1 \\
        --lightgbm-rounds 5                                                                   # CPU smoke run

Generates (vectorised, not timed into any row) a training file of `--queries` queries, each of 60-180 documents
(mean ~120, as MSLR-WEB30K), 136 features with 4 decimals, 10% of values 0 and left out (sparse rows), graded
labels 0-4 from a hidden non-linear function; and a held-out test file of a fifth as many queries from the same
function. Then runs, each as a fresh process from launch to its model on disk:
  native      training_code/train_ddp.py, shipped defaults, `--epochs N --test FILE` (torchrun for 2 GPUs)
  lightning   training_code/train_lightning.py, the same
  plain       benchmarks/baselines/plain_letor.py: scikit-learn's loader, DataLoader, DDP, the same model
  lightgbm    benchmarks/baselines/lightgbm_lambdarank.py: LightGBM lambdarank (500 rounds, 255 leaves, learning
              rate 0.05, every host core) on the arrays of the project's LETOR parser
Each run's wall is split into start-up, ingest, to device (and set-up, to the first logged training step),
training, evaluation and saving, from the times its log lines arrive (the project's `ingest:` and metric lines, the
baselines' `plain:` and `lightgbm:` lines). Table on stdout; section `time-to-model` in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from benchmarks.baselines.lightgbm_lambdarank import PARAMS as LIGHTGBM_PARAMS
from benchmarks.harness.machine import SAFE_NCCL_ENV, machine_description, scheduling
from benchmarks.harness.project_code import TRAINING_CODE, revision_tree
from benchmarks.harness.report import BENCHMARKS_DOC, markdown_table, provenance, write_section
from benchmarks.harness.timed_run import run_timed
from ranker.data import host_cache
from ranker.data import synthetic
from ranker.data.letor_parser import available_cores
from ranker.model.metrics import ndcg_per_query
from ranker.data.ranking_data import RankingData
from ranker.log_format import parse_metrics
from ranker.training import timeline

SECTION = "time-to-model"
PLAIN_SCRIPT = Path(__file__).resolve().parents[1] / "baselines" / "plain_letor.py"
LIGHTGBM_SCRIPT = PLAIN_SCRIPT.with_name("lightgbm_lambdarank.py")
ENTRY_POINTS = {"native": "train_ddp.py", "lightning": "train_lightning.py"}
RUN_TITLES = {"native": "entry points", "lightning": "entry points", "plain": "plain PyTorch", "lightgbm": "LightGBM"}
"""What the section's title calls each of `--runs`."""
THIS_TREE = "this tree"
PHASES = ("start-up", "ingest", "to device", "training", "evaluation", "saving")
# The events each run's log marks, in order; a phase is the time between two of them (launch is 0).
EVENTS = ("ingest start", "ingest end", "training start", "training end", "evaluation end", "exit")


@dataclass
class Run:
    name: str
    gpus: int
    events: dict[str, float] = field(default_factory=dict)
    ndcg_at_10: float | None = None
    note: str = ""
    curve: list[tuple[float, float]] = field(default_factory=list)
    """(seconds since launch, validation NDCG@10) at each validation the run logged, in order."""
    phase_marks: dict[str, float] = field(default_factory=dict)
    """An entry point's `timeline:` marks (ranker.training.timeline): seconds from its process start to each phase."""
    code: str = THIS_TREE
    """Whose training code ran: this tree's, or a baseline revision's."""

    @property
    def wall(self) -> float:
        return self.events["exit"]

    @property
    def best_validation(self) -> tuple[float, float] | None:
        """(seconds since launch, validation NDCG@10) of the first validation no later one beat: when the model the
        run exports existed (both the entry points and LightGBM keep the earlier of equal scores)."""
        return max(self.curve, key=lambda point: point[1], default=None)

    @property
    def fixed_cost(self) -> float | None:
        """Launch to the first step plus the last step to the model exported, from the entry point's own timeline;
        None for a run that logged none."""
        marks = self.phase_marks
        if not {"first step", "trained", "exported"} <= marks.keys():
            return None
        return marks["first step"] + marks["exported"] - marks["trained"]

    def phases(self) -> dict[str, float]:
        times = [0.0] + [self.events[event] for event in EVENTS]
        return dict(zip(PHASES, np.diff(times)))


def generate_dataset(folder: Path, queries: int, docs_per_query: int, features: int) -> tuple[Path, Path]:
    """Train and held-out test files (separate seeds, one relevance function), written on two threads."""
    def write(seed: int, count: int, name: str) -> Path:
        generated = synthetic.generate(count, docs_per_query, features, seed=seed, varied_sizes=True,
                                       zero_fraction=0.1)
        return synthetic.write_letor(generated, folder, with_qid=True, name=name)

    with ThreadPoolExecutor(2) as pool:
        train = pool.submit(write, 0, queries, "rank.train")
        test = pool.submit(write, 1, max(2, queries // 5), "rank.test")
        return train.result(), test.result()


def count_lines(path: Path) -> int:
    with path.open("rb") as handle:
        return sum(block.count(b"\n") for block in iter(lambda: handle.read(1 << 24), b""))


def launch_command(script: Path, gpus: int, arguments: list[str]) -> list[str]:
    if gpus == 1:
        return [sys.executable, str(script), *arguments]
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={gpus}", str(script),
            *arguments]


def project_events(lines: list[tuple[float, str]]) -> tuple[dict[str, float], float]:
    """Events from an entry point's log: `ingest:` lines (each gives its own seconds), metric lines."""
    ingests = [(at, float(match.group(1))) for at, text in lines
               if (match := re.match(r"ingest: .* in ([0-9.]+)s$", text))]
    steps = [at for at, text in lines if re.match(r"epoch=\S+ step=\S+ train_loss=\S+ .*samples_per_second=", text)]
    final = [(at, text) for at, text in lines if "test_ndcg@10=" in text]
    if not (ingests and steps and final):
        raise RuntimeError("the job's log lacks an ingest, a training metric or the final test line")
    ndcg = float(re.search(r"test_ndcg@10=([0-9.eE+-]+)", final[-1][1]).group(1))
    return {"ingest start": min(at - seconds for at, seconds in ingests), "ingest end": max(at for at, _ in ingests),
            "training start": steps[0], "training end": steps[-1], "evaluation end": final[-1][0],
            "exit": lines[-1][0]}, ndcg


def validation_curve(lines: list[tuple[float, str]]) -> list[tuple[float, float]]:
    """(arrival, val_ndcg@10) of every validation line: the entry points' per-epoch lines and the LightGBM baseline's
    per-round lines. An entry point's final line scores the exported weights, one of its epochs' (each has a line of
    its own), so like any line that carries the test metrics it adds a point only where it beats every logged one."""
    curve: list[tuple[float, float]] = []
    for at, text in lines:
        metrics = parse_metrics(text)
        if "val_ndcg@10" not in metrics:
            continue
        if "test_ndcg@10" not in metrics or metrics["val_ndcg@10"] > max((score for _, score in curve), default=-1.0):
            curve.append((at, metrics["val_ndcg@10"]))
    return curve


def marked_events(lines: list[tuple[float, str]], prefix: str) -> dict[str, float]:
    """Events from a baseline's `<prefix>: <event> ...` lines, and its exit."""
    pattern = re.compile(rf"{prefix}: ({'|'.join(EVENTS[:-1])})\b")
    return {**{match.group(1): at for at, text in lines if (match := pattern.match(text))}, "exit": lines[-1][0]}


def plain_events(lines: list[tuple[float, str]]) -> tuple[dict[str, float], float]:
    ndcg = next(float(text.rsplit("=", 1)[1]) for _, text in lines if text.startswith("plain: evaluation end"))
    return marked_events(lines, "plain"), ndcg


def run_project(entry_point: str, gpus: int, train: Path, test: Path, epochs: int | None, work: Path, env: dict,
                flags: Sequence[str] = (), name: str | None = None, code: Path = TRAINING_CODE) -> Run:
    """`entry_point` of the training code in `code` launched as a user launches it on `gpus` processes: `--epochs`
    unless None (the shipped default), then `flags`; the run's files go to a folder named after `name` (default: the
    entry point's)."""
    name = name or next(label for label, script in ENTRY_POINTS.items() if script == entry_point)
    out = work / f"{name}-{gpus}"
    arguments = ["--train", str(train), "--test", str(test), *(["--epochs", str(epochs)] if epochs is not None else []),
                 *flags, "--model-dir", str(out / "model"), "--output-data-dir", str(out / "output"),
                 "--checkpoint-dir", str(out / "checkpoints")]
    # A cache of its own: each run parses the text as a job with a fresh host would (ranker.data.host_cache).
    env = {**env, host_cache.CACHE_DIR_VARIABLE: str(out / "host-cache")}
    lines = run_timed(launch_command(code / entry_point, gpus, arguments), code, env, work / f"{name}-{gpus}.log")
    events, ndcg = project_events(lines)
    return Run(name, gpus, events, ndcg, curve=validation_curve(lines),
               phase_marks=timeline.read("\n".join(text for _, text in lines)))


def run_plain(gpus: int, train: Path, test: Path, epochs: int, work: Path, env: dict) -> Run:
    arguments = ["--train", str(train), "--test", str(test), "--epochs", str(epochs)]
    env = {**env, "PLAIN_MODEL_PATH": str(work / f"plain-{gpus}.pt")}
    lines = run_timed(launch_command(PLAIN_SCRIPT, gpus, arguments), work, env, work / f"plain-{gpus}.log")
    events, ndcg = plain_events(lines)
    return Run("plain PyTorch", gpus, events, ndcg)


def run_lightgbm(train: Path, test: Path, rounds: int, work: Path, env: dict, threads: int | None = None,
                 name: str = "lightgbm", early_stopping: int = 0, python: str = sys.executable) -> Run:
    """benchmarks/baselines/lightgbm_lambdarank.py launched by `python` on every core (or `threads`), its files in the
    folder `name`, for `rounds` rounds or, with `early_stopping` patience, until it stops on the entry points'
    validation queries (`rounds` the cap); its held-out scores are scored here with the entry points' metric."""
    if not lightgbm_installed(python, env):  # a benchmark-only peer, carried to GPU hosts as a wheel
        return Run("LightGBM lambdarank", 0, note=f"not installed for {python}: pip install lightgbm==4.7.0")
    threads = threads or available_cores()
    out = work / name
    # The script reads the text with the project's parser: the training code goes on its path.
    env = {**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(TRAINING_CODE), env.get("PYTHONPATH")]))}
    lines = run_timed([python, str(LIGHTGBM_SCRIPT), "--train", str(train), "--test", str(test), "--output",
                       str(out), "--rounds", str(rounds), "--early-stopping", str(early_stopping), "--threads",
                       str(threads)],
                      Path.cwd(), env, work / f"{name}.log")  # this cwd: a relative PYTHONPATH finds LightGBM alike
    ended = next(text for _, text in lines if text.startswith("lightgbm: training end"))
    reported = dict(item.split("=") for item in ended.split()[3:])
    held_out = np.load(out / "test_scores.npz")
    ndcg = held_out_ndcg_at_10(held_out["scores"], held_out["labels"], held_out["offsets"])
    curve = validation_curve(lines)
    trained = (f"early stopping (patience {early_stopping}, cap {rounds}) after {len(curve)} rounds, best round "
               f"{max(range(len(curve)), key=lambda index: curve[index][1]) + 1}" if early_stopping
               else f"{rounds} rounds")
    return Run("LightGBM lambdarank", 0, marked_events(lines, "lightgbm"), ndcg, curve=curve,
               note=f"{trained}, {LIGHTGBM_PARAMS['num_leaves']} leaves, lr {LIGHTGBM_PARAMS['learning_rate']}, "
                    f"{threads} threads ({reported['cores_busy']} cores busy training"
                    + (f", {reported['validation_scoring_s']} s of it scoring validation" if early_stopping else "")
                    + ")")


def lightgbm_installed(python: str, env: dict) -> bool:
    """Whether `python` (this interpreter or one of a small environment of its own) can import LightGBM."""
    probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('lightgbm') is None)"
    return subprocess.run([python, "-c", probe], env=env, check=False).returncode == 0


def held_out_ndcg_at_10(scores: np.ndarray, labels: np.ndarray, offsets: np.ndarray) -> float:
    """Mean NDCG@10 over the held-out queries, with the metric the entry points log (ranker.model.metrics)."""
    data = RankingData(np.asarray(scores, np.float32)[:, None], np.asarray(labels, np.float32), offsets)
    padded_scores, padded_labels, mask = (torch.from_numpy(array) for array in data.padded())
    return float(ndcg_per_query(padded_scores[..., 0], padded_labels, mask, 10).mean())


def payoff_statement(runs: list[Run], epochs: int) -> str:
    """From how many epochs the 2-GPU run of each entry point beats its 1-GPU run: fixed costs (everything but
    training) against the training time per epoch."""
    sentences = []
    for name in ENTRY_POINTS:
        one = next((run for run in runs if run.name == name and run.gpus == 1 and run.code == THIS_TREE), None)
        two = next((run for run in runs if run.name == name and run.gpus == 2 and run.code == THIS_TREE), None)
        if one is None or two is None:
            continue
        per_epoch = {run.gpus: run.phases()["training"] / epochs for run in (one, two)}
        fixed = {run.gpus: run.wall - run.phases()["training"] for run in (one, two)}
        saved_per_epoch, extra_fixed = per_epoch[1] - per_epoch[2], fixed[2] - fixed[1]
        if saved_per_epoch <= 0:
            sentences.append(f"{name}: the second GPU trains no faster per epoch here ({per_epoch[2]:.2f} s against "
                             f"{per_epoch[1]:.2f} s), so it never pays for itself at this size.")
        else:
            breakeven = max(extra_fixed / saved_per_epoch, 0.0)
            sentences.append(f"{name}: 2 GPUs save {saved_per_epoch:.2f} s per epoch and cost {extra_fixed:+.2f} s of "
                             f"fixed time, so they pay for themselves from {breakeven:.1f} epochs on "
                             f"({'faster' if two.wall < one.wall else 'slower'} at {epochs} here).")
    return " ".join(sentences)


def render(runs: list[Run], args: argparse.Namespace, dataset: dict[str, object], machine: str,
           load: tuple[float, float]) -> str:
    """The section's body; `load`: the machine's one-minute load average at the start and the end of the runs."""
    headers = ["run", "GPUs", "launch to model (s)", *(f"{phase} (s)" for phase in PHASES), "test NDCG@10", "notes"]
    rows = []
    for run in runs:
        if not run.events:
            rows.append([run.name, run.gpus or "-", "-", *["-"] * len(PHASES), "-", run.note])
            continue
        phases = run.phases()
        rows.append([run.name if run.code == THIS_TREE else f"{run.name}, {run.code}", run.gpus or "CPU",
                     f"{run.wall:.1f}", *(f"{phases[p]:.1f}" for p in PHASES),
                     f"{run.ndcg_at_10:.4f}", run.note])
    return (f"{provenance(machine=machine)}\n"
            f"- Load average {load[0]:.1f} at the start, {load[1]:.1f} at the end, {scheduling()} (other work on the "
            "machine slows every run; runs compared in one table alternate, so it slows them alike)\n"
            f"- Data: {dataset['train_queries']:,} training queries ({dataset['train_docs']:,} documents, "
            f"{dataset['train_mb']:,.0f} MB of LETOR text) and {dataset['test_queries']:,} held-out test queries "
            f"({dataset['test_mb']:,.0f} MB), {args.features} features, 60-180 documents per query, 10% of values 0 "
            f"and left out; generated in {dataset['generate_s']:.0f} s (not counted)\n"
            f"- Project runs: shipped defaults, `--epochs {args.epochs} --test FILE`, one process per GPU (torchrun "
            "for 2), the file in the page cache. Phases from the time each log line arrived: start-up is launch to "
            "the start of ingest; ingest is text to arrays (all channels, the slowest rank); to device runs to the "
            "first logged training step (arrays to the GPU, model, optimizer, graph capture, the first "
            "`log_every` steps); training to the last training metric line (with per-epoch validation); "
            "evaluation the final validation and test scoring; saving the model, export and exit\n\n"
            f"{markdown_table(headers, rows)}\n\n{payoff_statement(runs, args.epochs)}\n")


def fixed_cost_table(runs: list[Run]) -> str:
    """Each entry point's fixed cost per code (this tree, a baseline), medians over its runs: launch to the first
    step, the last step to the model exported, the two together, and launch to exit."""
    groups: dict[tuple[str, int, str], list[Run]] = {}
    for run in runs:
        if run.fixed_cost is not None:
            groups.setdefault((run.name, run.gpus, run.code), []).append(run)
    rows = []
    for (name, gpus, code), group in groups.items():
        marks = [run.phase_marks for run in group]
        rows.append([name, gpus, code, len(group),
                     f"{statistics.median(mark['first step'] for mark in marks):.2f}",
                     f"{statistics.median(mark['exported'] - mark['trained'] for mark in marks):.2f}",
                     f"{statistics.median(run.fixed_cost for run in group):.2f}",
                     f"{statistics.median(run.wall for run in group):.2f}"])
    return markdown_table(["run", "GPUs", "code", "runs", "launch to first step (s)", "last step to model exported (s)",
                           "fixed cost (s)", "launch to exit (s)"], rows)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=31_531, help="training queries (MSLR-WEB30K has 31,531)")
    parser.add_argument("--docs-per-query", type=int, default=120, help="mean documents per query")
    parser.add_argument("--features", type=int, default=136)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--gpus", default="1,2", help="comma-separated process counts to run each trainer on")
    parser.add_argument("--runs", default="native,lightning,plain,lightgbm", help="which runs, comma-separated")
    parser.add_argument("--lightgbm-rounds", type=int, default=500)
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda" if torch.cuda.is_available() else "cpu",
                        help="cpu runs every trainer on CPU processes (gloo): a smoke run")
    parser.add_argument("--work", type=Path, default=None, help="folder for the data, logs and models (default: temp)")
    parser.add_argument("--doc", type=Path, default=BENCHMARKS_DOC)
    parser.add_argument("--section", default=SECTION, help="docs/benchmarks.md section to write (one per scale)")
    parser.add_argument("--baseline", metavar="GIT_REF",
                        help="also run the entry points of this git revision, alternating with this tree's, and add "
                             "a table of each one's fixed cost")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each entry point (and of the baseline's)")
    args = parser.parse_args(argv)
    load_at_start = os.getloadavg()[0]
    gpu_counts = [int(count) for count in args.gpus.split(",")]
    chosen = args.runs.split(",")
    if unknown := [run for run in chosen if run not in RUN_TITLES]:
        parser.error(f"--runs: {', '.join(unknown)} is not a run; choose from {', '.join(RUN_TITLES)}")
    env = {**os.environ, **SAFE_NCCL_ENV, "PYTHONUNBUFFERED": "1"}
    if args.device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""

    with tempfile.TemporaryDirectory(prefix="time-to-model-") as temporary:
        work = args.work or Path(temporary)
        work.mkdir(parents=True, exist_ok=True)
        print(f"generating {args.queries:,} queries of LETOR text in {work} ...", flush=True)
        started = time.perf_counter()
        train, test = generate_dataset(work / "data", args.queries, args.docs_per_query, args.features)
        dataset = {"generate_s": time.perf_counter() - started, "train_queries": args.queries,
                   "test_queries": max(2, args.queries // 5), "train_mb": train.stat().st_size / 1e6,
                   "test_mb": test.stat().st_size / 1e6, "train_docs": count_lines(train)}
        runs = []
        trees = [(THIS_TREE, TRAINING_CODE)] + ([(f"before (`{args.baseline}`)",
                                                   revision_tree(args.baseline, work / "baseline"))]
                                                 if args.baseline else [])
        for repeat in range(args.repeats):
            for name, entry_point in ENTRY_POINTS.items():
                for gpus in gpu_counts if name in chosen else ():
                    for index, (code, folder) in enumerate(trees):
                        print(f"running {name} ({code}) on {gpus} process(es) ...", flush=True)
                        run = run_project(entry_point, gpus, train, test, args.epochs, work, env,
                                          name=f"{name}-code{index}-run{repeat}", code=folder)
                        run.name, run.code = name, code
                        runs.append(run)
        if "plain" in chosen:
            for gpus in gpu_counts:
                print(f"running the plain PyTorch script on {gpus} process(es) ...", flush=True)
                runs.append(run_plain(gpus, train, test, args.epochs, work, env))
        if "lightgbm" in chosen:
            print("running LightGBM ...", flush=True)
            runs.append(run_lightgbm(train, test, args.lightgbm_rounds, work, env))

    body = render(runs, args, dataset, machine_description(args.device), (load_at_start, os.getloadavg()[0]))
    if args.baseline or args.repeats > 1:
        body += ("\nFixed cost of each entry point, the medians of its runs (this tree's and the baseline's alternating, "
                 "so the machine's load moves both alike), from the `timeline:` lines it logged:\n\n"
                 f"{fixed_cost_table(runs)}\n")
    print(body)
    ran = ", ".join(dict.fromkeys(RUN_TITLES[run] for run in chosen))
    write_section(args.section, f"Time to model on MSLR-WEB30K-shaped text ({args.queries:,} queries): {ran}", body,
                  doc=args.doc)
    print(f"written to {args.doc}")


if __name__ == "__main__":
    main()
