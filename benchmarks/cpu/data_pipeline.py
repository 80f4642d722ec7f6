"""CPU side of the data path: LETOR text parsing against scikit-learn's loader, the whole shipped job against that
loader, text-to-shard conversion and the streaming loader, against what the GPU trainers consume.

    python -m benchmarks.cpu.data_pipeline [--queries 2000] [--docs-per-query 100] [--features 136] [--repeats 1]
        [--job-repeats 3] [--import-repeats 5] [--import-baseline GIT_REF] [--job-baseline GIT_REF]

Writes a synthetic LETOR text file (a `qid:` column and 4-decimal values, about 1.4 KB a document as in MSLR-WEB;
the default is about 275 MB), then times these stages, each the median of `--repeats` runs (the text stages with the
file in the page cache, as it is right after the write; the others after an untimed warm-up):
  parse    scikit-learn's load_svmlight_file (the baseline), then ranker.data.letor_processes.parse_file with one worker
           process, then ranker.data.channels.read_letor_file (parse_file with a worker per core, plus grouping) on that file
  import   each entry point's import in a fresh interpreter (median of `--import-repeats`), beside torch's and
           Lightning's own, and the heavy modules each import loads; with `--import-baseline REF`, also the entry
           points of that git revision (`git archive REF training_code`), measured in the same run
  job      `python train_ddp.py --train FILE --max-steps 1` from launch to exit, `--job-repeats` consecutive runs,
           each beside scikit-learn's loader alone timed just before it on the same file, with the phases each run
           logged (ranker.training.timeline); with `--job-baseline REF`, each round also runs that git revision's job
  convert  ranker.data.convert's command, text in to binary shards out (parse + write)
  stream   ranker.data.streaming.StreamingBatches over those shards, in the trainer's batch shape (256 queries)
  fill     the loader threads' work alone (one thread, then the default number at once): what a GPU rank's loader
           costs the CPU
The loader's rates are set beside the native trainer's 1-GPU rate recorded in docs/benchmarks.md's gpu-scaling
section (each rank runs its own loader, so one GPU's rate is one loader's load). Table on stdout; section
`data-pipeline` in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import torch

from benchmarks.harness.models import PLAIN_MLP
from benchmarks.harness.machine import scheduling
from benchmarks.harness.project_code import TRAINING_CODE, revision_tree
from benchmarks.harness.report import BENCHMARKS_DOC, markdown_table, provenance, write_section
from sklearn.datasets import load_svmlight_file

from ranker.data import convert
from ranker.data import channels as data
from ranker.data import letor_processes
from ranker.data import synthetic
from ranker.data.batches import epoch_permutation
from ranker.data.letor_parser import available_cores
from ranker.data.streaming import StreamingBatches
from ranker.training import timeline

JOB_TARGET = 0.6  # the whole job, at most this share of scikit-learn's loader alone on the same file
ENTRY_POINTS = ("train_ddp.py", "train_lightning.py")
# What an entry point may pull in that a run does not always need (the names docs/benchmarks.md discusses).
HEAVY_MODULES = ("lightning", "torchmetrics", "scipy", "sklearn", "matplotlib", "torch._dynamo",
                 "ranker.data.streaming")

# The trainers' batch: 8192 documents per GPU = 256 whole queries of 32 documents (benchmarks/gpu/project_trainers.py).
BATCH_QUERIES = 256
GPU_SECTION = "gpu-scaling"
GPU_TRAINER = "native"


@dataclass(frozen=True)
class StageRate:
    """One stage's median run: how much it moved and how long that took."""

    stage: str
    seconds: float
    docs: int
    text_bytes: int | None = None  # text read, for the stages that read text
    batches: int | None = None  # batches served, for the loader

    @property
    def docs_per_second(self) -> float:
        return self.docs / self.seconds


def median_seconds(run: Callable[[], object], repeats: int, warm_up: bool = True) -> float:
    """Median wall time of `repeats` runs, after one untimed warm-up (imports, page cache, allocator) unless the
    run is long and its input already warm."""
    if warm_up:
        run()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def write_letor_text(folder: Path, queries: int, docs_per_query: int, features: int) -> Path:
    # write_letor prints 4 decimals, so the file has real LETOR's size per document.
    return synthetic.write_letor(synthetic.generate(queries, docs_per_query, features), folder, with_qid=True)


def scikit_learn_loader(text: Path) -> None:
    """What ranker.data.channels read with before its own parser, and what a hand-written PyTorch script reads with."""
    load_svmlight_file(str(text), dtype="float32", query_id=True, zero_based=False)


def measure_parse(text: Path, docs: int, repeats: int) -> list[StageRate]:
    size = text.stat().st_size
    baseline = median_seconds(lambda: scikit_learn_loader(text), repeats, warm_up=False)
    one_process = median_seconds(lambda: letor_processes.parse_file(text, processes=1), repeats, warm_up=False)
    ours = median_seconds(lambda: data.read_letor_file(text), repeats, warm_up=False)
    return [StageRate("parse: scikit-learn's load_svmlight_file (baseline)", baseline, docs, text_bytes=size),
            StageRate("parse: ranker.data.letor_processes.parse_file, 1 worker process", one_process, docs,
                      text_bytes=size),
            StageRate(f"parse: ranker.data.channels.read_letor_file ({available_cores()} worker processes)", ours, docs,
                      text_bytes=size)]


@dataclass(frozen=True)
class JobTiming:
    loader_seconds: float
    """scikit-learn's loader alone on the same file, timed just before the job."""
    seconds: float
    ingest_seconds: float
    phases: dict[str, float]
    """The job's `timeline:` marks: seconds from its process start to each phase (ranker.training.timeline)."""
    code: str = "this tree"

    @property
    def ratio(self) -> float:
        return self.seconds / self.loader_seconds


def measure_job(text: Path, work: Path, repeats: int, trees: Sequence[tuple[str, Path]]) -> list[JobTiming]:
    """The shipped native entry point as a job runs it (a fresh interpreter, shipped defaults), one step, `repeats`
    consecutive rounds of one run per `(code, training_code folder)` in `trees`, each run beside the loader alone
    timed just before it (the machine's load moves both alike)."""
    command = [sys.executable, "train_ddp.py", "--train", str(text), "--max-steps", "1", "--model-dir",
               str(work / "model"), "--output-data-dir", str(work / "output"), "--checkpoint-dir",
               str(work / "checkpoints")]
    runs = []
    for _ in range(repeats):
        for code, folder in trees:
            loader_seconds = median_seconds(lambda: scikit_learn_loader(text), 1, warm_up=False)
            started = time.perf_counter()
            finished = subprocess.run(command, cwd=folder, capture_output=True, text=True, check=False)
            seconds = time.perf_counter() - started
            if finished.returncode:
                raise RuntimeError(f"the job ({code}) failed ({finished.returncode}): {finished.stderr[-2000:]}")
            ingests = ingest_seconds(finished.stdout)
            if not ingests:
                raise RuntimeError(f"the job ({code}) logged no `ingest:` line; its output ends:\n"
                                   f"{finished.stdout[-2000:]}")
            runs.append(JobTiming(loader_seconds, seconds, sum(ingests), timeline.read(finished.stdout), code))
    return runs


@dataclass(frozen=True)
class ImportTiming:
    label: str
    code: str
    seconds: float
    """Median over fresh interpreters, from before the import statement to after it."""
    heavy_modules: tuple[str, ...]


IMPORT_PROBE = """import sys, time
started = time.perf_counter()
import {module}
print(time.perf_counter() - started)
print(" ".join(name for name in {heavy!r} if name in sys.modules))
"""


def time_import(module: str, folder: Path) -> tuple[float, tuple[str, ...]]:
    """`import module` with `folder` (a training_code tree) first on the path, in a fresh interpreter: its seconds and
    the HEAVY_MODULES it loaded."""
    probe = IMPORT_PROBE.format(module=module, heavy=HEAVY_MODULES)
    env = {**os.environ, "PYTHONPATH": str(folder), "PYTHONDONTWRITEBYTECODE": "1"}
    finished = subprocess.run([sys.executable, "-c", probe], cwd=folder, env=env, capture_output=True, text=True,
                              check=False)
    if finished.returncode:
        raise RuntimeError(f"import {module} failed in {folder}: {finished.stderr[-2000:]}")
    *_, seconds, heavy = finished.stdout.splitlines()  # the probe's last two lines
    return float(seconds), tuple(heavy.split())


def measure_imports(repeats: int, baseline_ref: str | None, work: Path) -> list[ImportTiming]:
    """torch and Lightning alone, then each entry point of `baseline_ref` (when given) and of this tree: `repeats`
    rounds of one fresh interpreter each, so that the machine's load moves every figure alike."""
    trees = ([(f"before (`{baseline_ref}`)", revision_tree(baseline_ref, work))] if baseline_ref else []) + \
        [("this tree", TRAINING_CODE)]
    probes = [("torch", TRAINING_CODE, "`import torch` alone", "-"),
              ("lightning", TRAINING_CODE, "`import lightning` alone", "-")]
    probes += [(Path(script).stem, folder, script, code) for script in ENTRY_POINTS for code, folder in trees]
    rounds = [[time_import(module, folder) for module, folder, _, _ in probes] for _ in range(repeats)]
    return [ImportTiming(label, code, statistics.median(round_[index][0] for round_ in rounds), rounds[-1][index][1])
            for index, (_, _, label, code) in enumerate(probes)]


def ingest_seconds(log: str) -> list[float]:
    """The seconds of each `ingest:` line a job printed (ranker.data.channels logs one per channel and process)."""
    return [float(seconds) for seconds in re.findall(r"^ingest: .* in ([0-9.]+)s$", log, re.MULTILINE)]


def measure_convert(text: Path, output: Path, docs: int, repeats: int) -> StageRate:
    def run_converter() -> None:
        with contextlib.redirect_stdout(io.StringIO()):  # its summary lines would interleave with the table
            convert.main(["--input", str(text), "--output", str(output)])

    seconds = median_seconds(run_converter, repeats, warm_up=False)
    return StageRate("convert: text -> binary shards", seconds, docs, text_bytes=text.stat().st_size)


def measure_stream(loader: StreamingBatches, batches: int, repeats: int) -> StageRate:
    """Batches as the trainer takes them: on the CPU device each one is also copied once on the host."""
    def serve_batches() -> None:
        served, epoch = 0, 0
        while served < batches:
            for _ in loader.epoch_batches(epoch):
                served += 1
                if served == batches:
                    break
            epoch += 1

    seconds = median_seconds(serve_batches, repeats)
    return StageRate(f"stream: shards -> batches of {BATCH_QUERIES} queries (CPU device)", seconds,
                     batches * BATCH_QUERIES * loader.max_docs, batches=batches)


def measure_fill(loader: StreamingBatches, batches: int, repeats: int, threads: int) -> StageRate:
    """The loader threads' own work (gathering whole queries from the memory map into host buffers), `threads` of
    them at once, `batches` batches each. On a GPU this is the loader's whole CPU cost: the copy to the device is an
    asynchronous DMA from pinned memory, where the CPU device's host copy (in `measure_stream`) is not.
    StreamingBatches has no public per-batch call, so this drives its buffer and fill methods directly."""
    order = epoch_permutation(len(loader.local_queries), loader.seed, 0).numpy()
    batch_queries = [loader.local_queries[order[step * BATCH_QUERIES:(step + 1) * BATCH_QUERIES]]
                     for step in range(loader.steps_per_epoch)]
    buffers = [loader._new_buffer() for _ in range(threads)]

    def fill_batches(buffer) -> None:
        for step in range(batches):
            loader._fill(buffer, batch_queries[step % len(batch_queries)])

    def fill_in_parallel() -> None:
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(fill_batches, buffers))

    seconds = median_seconds(fill_in_parallel, repeats)
    label = "one loader thread" if threads == 1 else f"{threads} loader threads at once (the default)"
    return StageRate(f"fill: {label}", seconds, threads * batches * BATCH_QUERIES * loader.max_docs,
                     batches=threads * batches)


def recorded_gpu_rates(doc: Path) -> tuple[dict[int, float], str | None]:
    """The native trainer's 1-GPU documents/s training the plain MLP, by width, and the machine line, from the
    gpu-scaling section of `doc`; empty when the section or its rows are absent."""
    text = doc.read_text() if doc.exists() else ""
    section = re.search(rf"<!-- {GPU_SECTION}:start -->(.*?)<!-- {GPU_SECTION}:end -->", text, re.DOTALL)
    if not section:
        return {}, None
    machine = re.search(r"^- Machine: (.+)$", section.group(1), re.MULTILINE)
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")]
            for line in section.group(1).splitlines() if line.startswith("|") and not line.startswith("|---")]
    if not rows:
        return {}, None
    header, body = rows[0], rows[1:]
    column = {name: index for index, name in enumerate(header)}
    rates = {int(row[column["width"]]): float(row[column["samples/s"]].replace(",", ""))
             for row in body if row[column["trainer"]] == GPU_TRAINER and row[column["layout"]] == "1 GPU"
             and row[column["model"]] == PLAIN_MLP}
    return rates, machine.group(1) if machine else None


def stage_table(stages: list[StageRate]) -> str:
    rows = [[stage.stage,
             f"{stage.text_bytes / stage.seconds / 1e6:,.1f}" if stage.text_bytes else "-",
             f"{stage.docs_per_second:,.0f}",
             f"{stage.batches / stage.seconds:,.1f}" if stage.batches else "-",
             f"{stage.seconds:.2f}"] for stage in stages]
    return markdown_table(["stage", "MB/s of text", "docs/s", "batches/s", "median s"], rows)


def demand_table(one_thread: StageRate, loader: StageRate, threads: int, gpu_rates: dict[int, float],
                 bytes_per_doc: int) -> str:
    """Per width: the GPU's appetite, the shard read rate it implies, whether the default loader keeps up on this
    machine, and how many loader threads (each on a core of its own) it takes."""
    rows = []
    for width, rate in sorted(gpu_rates.items()):
        keeps_up = loader.docs_per_second >= rate
        rows.append([width, f"{rate:,.0f}", f"{rate * bytes_per_doc / 1e9:.2f}", f"{one_thread.docs_per_second:,.0f}",
                     "yes" if keeps_up else f"no: {rate / loader.docs_per_second:.1f}x short",
                     math.ceil(rate / one_thread.docs_per_second)])
    return markdown_table(["width", "native trainer docs/s (1 GPU)", "shard read GB/s", "one loader thread docs/s",
                           f"{threads} threads keep up here?", "loader threads (cores) per GPU"], rows)


def verdict(one_thread: StageRate, loader: StageRate, threads: int, gpu_rates: dict[int, float]) -> str:
    if not gpu_rates:
        return (f"No GPU figures to compare with: docs/benchmarks.md has no `{GPU_SECTION}` section with "
                f"`{GPU_TRAINER}` 1-GPU rows. Run `python -m benchmarks.gpu.gpu_scaling` on a GPU machine, then rerun "
                "this.")
    speedup = loader.docs_per_second / one_thread.docs_per_second
    short = {width: rate for width, rate in gpu_rates.items() if rate > loader.docs_per_second}
    if not short:
        return (f"The streaming loader's {threads} threads ({loader.docs_per_second:,.0f} docs/s together on this "
                f"{os.cpu_count()}-core machine, {speedup:.2f}x one thread: numpy's gathers release the interpreter "
                "lock) keep up with the native trainer at every width.")
    widths = ", ".join(f"width {width} needs {math.ceil(rate / one_thread.docs_per_second)}"
                       for width, rate in sorted(short.items()))
    return (f"The streaming loader's {threads} threads ({loader.docs_per_second:,.0f} docs/s together on this "
            f"{os.cpu_count()}-core machine, {speedup:.2f}x one thread) do not keep up with the native trainer "
            f"everywhere: {widths} loader threads per GPU (`--loader-threads`), each on a core of its own. Below "
            "that the GPU waits for data; the in-memory path (GPU-resident queries, ranker.data.batches) has no such "
            "limit while the data fits in GPU memory.")


def job_table(jobs: list[JobTiming]) -> str:
    if not jobs:
        return "Not run (`--job-repeats 0`)."
    rows = [[number, job.code, f"{job.loader_seconds:.2f}", f"{job.seconds:.2f}", f"{job.ratio:.2f}",
             f"{job.ingest_seconds:.2f}", f"{job.seconds - job.ingest_seconds:.2f}"]
            for number, job in enumerate(jobs, 1)]
    ours = [job for job in jobs if job.code == "this tree"]
    met = sum(job.ratio <= JOB_TARGET for job in ours)
    return (markdown_table(["run", "code", "scikit-learn's loader alone, s", "the whole job, launch to exit, s",
                            "x the loader alone", "of which ingest (its `ingest:` lines), s",
                            "of which everything else (start-up, set-up, the step, evaluation, export), s"], rows)
            + f"\n\nTarget: the whole job (this tree) at most {JOB_TARGET}x of the loader alone in each run: met in "
              f"{met} of {len(ours)} runs.")


def phase_table(jobs: list[JobTiming]) -> str:
    """Per phase: when each run reached it (seconds since its process started) and how long it took after the phase
    before it; the exit is the launch-to-exit time the job table shows."""
    if not jobs:
        return ""
    phases = [phase for phase in timeline.PHASES if any(phase in job.phases for job in jobs)]
    rows = []
    for index, phase in enumerate([*phases, "exit"]):
        cells = []
        for job in jobs:
            if job.code != "this tree" and not job.phases:
                cells.append("-")  # a revision that logs no timeline
                continue
            reached = job.seconds if phase == "exit" else job.phases.get(phase)
            before = 0.0 if index == 0 else job.phases.get(phases[index - 1])
            cells.append("-" if reached is None or before is None else f"{reached:.2f} (+{reached - before:.2f})")
        rows.append([phase, *cells])
    return markdown_table(["phase (seconds since the process started, then since the phase before)",
                           *[f"run {number} ({job.code})" for number, job in enumerate(jobs, 1)]], rows)


def import_table(timings: list[ImportTiming], repeats: int) -> str:
    if not timings:
        return "Not run (`--import-repeats 0`)."
    rows = [[timing.label, timing.code, f"{timing.seconds:.2f}", ", ".join(timing.heavy_modules) or "none"]
            for timing in timings]
    table = markdown_table(["import", "code", f"seconds (median of {repeats} fresh interpreters)",
                            f"of {', '.join(HEAVY_MODULES)}: loaded"], rows)
    by_label = {(timing.label, timing.code): timing.seconds for timing in timings}
    torch_alone, lightning_alone = by_label["`import torch` alone", "-"], by_label["`import lightning` alone", "-"]
    lines = [script + ": " + ", ".join(f"{seconds:.2f} s {code}" for (label, code), seconds in by_label.items()
                                       if label == script) for script in ENTRY_POINTS]
    return (f"{table}\n\n" + "; ".join(lines) + f". Beyond torch's {torch_alone:.2f} s, `import lightning` alone takes "
            f"{lightning_alone - torch_alone:.2f} s: Lightning's own imports (torch._dynamo through lightning.fabric, "
            "torchmetrics and with it scipy and matplotlib), a fixed cost of train_lightning.py that no setting "
            "avoids.")


def render(stages: list[StageRate], jobs: list[JobTiming], imports: list[ImportTiming], gpu_rates: dict[int, float],
           gpu_machine: str | None, args: argparse.Namespace, text_mb: float, shard_mb: float,
           load_at_start: float) -> str:
    one_thread, loader = stages[-2:]
    threads = loader.batches // one_thread.batches
    bytes_per_doc = 4 * args.features + 4  # float32 features and label per document, as the shards store them
    comparison = demand_table(one_thread, loader, threads, gpu_rates, bytes_per_doc) if gpu_rates else ""
    baseline, one_process, ours = stages[:3]
    return (
        f"{provenance()}\n- CPU cores: {os.cpu_count()}, load average {load_at_start:.1f} at the start (other work "
        f"on the machine lowers these figures); {scheduling()}; torch {torch.__version__}\n"
        f"- Data: synthetic LETOR text, {args.queries:,} queries x {args.docs_per_query} documents x "
        f"{args.features} features ({text_mb:,.1f} MB of text, {shard_mb:,.1f} MB of shards); median of "
        f"{args.repeats} timed run(s); text in the page cache\n"
        f"- Loader: StreamingBatches, batches of {BATCH_QUERIES} queries ({BATCH_QUERIES * args.docs_per_query} "
        "documents), shards in the page cache (from a cold disk, the shard read rate below must also come from the "
        "disk). `stream` is the whole loader on the CPU device, which adds a host copy of each batch; `fill` is its "
        "threads' work alone, the loader's CPU cost on a GPU, where the copy to the device is an asynchronous DMA "
        "(an upper bound there: the threads share the interpreter lock with the training loop)\n\n"
        f"{stage_table(stages)}\n\n"
        f"Parsing: {ours.text_bytes / ours.seconds / 1e6:,.1f} MB/s with {available_cores()} worker processes "
        f"({one_process.seconds / ours.seconds:.2f}x one process's "
        f"{one_process.text_bytes / one_process.seconds / 1e6:,.1f} MB/s) against scikit-learn's "
        f"{baseline.text_bytes / baseline.seconds / 1e6:,.1f} MB/s ({baseline.seconds / ours.seconds:.1f}x), the "
        "same arrays (tests/training/test_letor_parser.py).\n\n"
        "Start-up: what importing each entry point costs (a fresh interpreter each; the job imports before it "
        f"reads any data):\n\n{import_table(imports, args.import_repeats)}\n\n"
        f"The whole shipped job on that file, against the loader alone ({len(jobs)} consecutive runs, each a fresh "
        f"interpreter, shipped defaults, CPU):\n\n{job_table(jobs)}\n\n"
        "Where each run's time went, from the `timeline:` lines it logged (ranker.training.timeline: `imported` is "
        "the interpreter's start and the entry point's imports, `parsed` the channels read (where the entry point "
        "started parsing before its imports, ranker.training.early_parse, the two overlap, and so do its `ingest:` "
        "seconds and the rest), `encoding fitted` the "
        "model built and its input encoding fitted, `first step` the optimizer built and one step run, `evaluated` "
        "the final validation, `model written` the weights, config, TorchScript file and metrics.json, `exported` "
        "model.pt2, the handler and the plots, `exit` the process gone):\n\n"
        f"{phase_table(jobs)}\n\n"
        f"What the GPU trainers consume ({gpu_machine or 'no GPU run recorded'}, from the `{GPU_SECTION}` section; "
        "each rank runs its own loader):\n\n"
        f"{comparison}\n\n{verdict(one_thread, loader, threads, gpu_rates)}\n"
    )


def folder_megabytes(folder: Path) -> float:
    return sum(path.stat().st_size for path in folder.iterdir()) / 1e6


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=2000, help="queries in the synthetic text file")
    parser.add_argument("--docs-per-query", type=int, default=100, help="documents per query")
    parser.add_argument("--features", type=int, default=136, help="features per document (MSLR-WEB uses 136)")
    parser.add_argument("--repeats", type=int, default=1, help="timed runs per stage (median)")
    parser.add_argument("--job-repeats", type=int, default=3,
                        help="consecutive runs of the whole job, each beside the loader alone (0 leaves the job out)")
    parser.add_argument("--import-repeats", type=int, default=5,
                        help="fresh interpreters per import timing (0 leaves the imports out)")
    parser.add_argument("--import-baseline", default=None, metavar="GIT_REF",
                        help="also time the entry points of this git revision, for a before/after in one run")
    parser.add_argument("--job-baseline", default=None, metavar="GIT_REF",
                        help="also run the whole job of this git revision, beside this tree's in each round")
    parser.add_argument("--stream-batches", type=int, default=40, help="batches the loader serves per timed run")
    parser.add_argument("--doc", type=Path, default=BENCHMARKS_DOC, help="Markdown file to write the section into")
    args = parser.parse_args(argv)
    if args.queries < BATCH_QUERIES:
        parser.error(f"--queries: {args.queries} is fewer than one batch of {BATCH_QUERIES} queries; raise it")

    load_at_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="data-pipeline-") as work:
        text_dir, shard_dir = Path(work) / "text", Path(work) / "shards"
        print(f"writing {args.queries:,} queries of synthetic LETOR text ...", flush=True)
        text = write_letor_text(text_dir, args.queries, args.docs_per_query, args.features)
        docs = args.queries * args.docs_per_query
        stages = [*measure_parse(text, docs, args.repeats), measure_convert(text, shard_dir, docs, args.repeats)]
        print("timing the entry points' imports ...", flush=True)
        imports = measure_imports(args.import_repeats, args.import_baseline, Path(work) / "baseline") \
            if args.import_repeats else []
        print("timing the whole job ...", flush=True)
        trees = ([(f"before (`{args.job_baseline}`)", revision_tree(args.job_baseline, Path(work) / "job-baseline"))]
                 if args.job_baseline else []) + [("this tree", TRAINING_CODE)]
        jobs = measure_job(text, Path(work) / "job", args.job_repeats, trees)
        loader = StreamingBatches(shard_dir, BATCH_QUERIES, rank=0, world_size=1, seed=0, device=torch.device("cpu"))
        stages += [measure_stream(loader, args.stream_batches, args.repeats),
                   measure_fill(loader, args.stream_batches, args.repeats, threads=1),
                   measure_fill(loader, args.stream_batches, args.repeats, threads=loader.threads)]
        text_mb, shard_mb = text.stat().st_size / 1e6, folder_megabytes(shard_dir)

    gpu_rates, gpu_machine = recorded_gpu_rates(args.doc)
    body = render(stages, jobs, imports, gpu_rates, gpu_machine, args, text_mb, shard_mb, load_at_start)
    print(body)
    write_section("data-pipeline", "CPU data path: parsing, the whole job, conversion, streaming loader", body,
                  doc=args.doc)
    print(f"written to {args.doc}")


if __name__ == "__main__":
    main()
