"""How close the path a torch 2.2 container takes comes to the fast path, on one GPU at train_ddp.py's defaults.

    python -m benchmarks.gpu.gpu_portable_path [--queries 4000] [--repeats 2]

train_ddp.py's step (benchmarks.gpu.native_harness) at its shipped defaults (7 dense layers of width 256, layer norm,
dropout 0.3, 16 queries per batch, listwise loss) on synthetic queries shaped like MSLR-WEB30K's: 136 features, a
query's document count drawn around MSLR-WEB30K's mean of ~120 with its longest query's 1,251, every query padded to
the longest as a run pads them. Three runs, interleaved `--repeats` times, on the same data:
- fast path: the paths this torch takes (ranker.gpu.fast_paths);
- as torch 2.2: `RANKER_AS_TORCH=2.2`, the path a torch 2.2 container takes (autocast Linear + ReLU, CUDA graph);
- plain eager: as torch 2.2 with `--cuda-graph false`.
Each row gives the median step rate, the documents per second it means, its share of the fast path's step rate and
the path line the run logged. Target: as torch 2.2 at 70% of the fast path or more.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
from pathlib import Path

import numpy as np
import torch

from benchmarks.harness.models import SHIPPED_MODEL, SHIPPED_WIDTH, benchmark_model, model_line
from benchmarks.gpu.native_harness import NativeHarness, session_over
from benchmarks.harness.report import BENCHMARKS_DOC, markdown_table, provenance, write_section
from benchmarks.harness.timing import StepWindows
from ranker.gpu import fast_paths
from ranker.config import TrainConfig
from ranker.data.channels import RankingData
from sagemaker_distributed import detect_topology
from ranker.training.session import Session
from ranker.data.synthetic import generate

MSLR_FEATURES = 136
MSLR_MEAN_DOCS = 120  # MSLR-WEB30K: ~3.77M documents over 31,531 queries
MSLR_MAX_DOCS = 1251  # its longest query
TARGET = 0.70

# (name, RANKER_AS_TORCH value or "" for this torch's own, TrainConfig changes)
VARIANTS = [("fast path", "", {}), ("as torch 2.2", "2.2", {}), ("plain eager", "2.2", {"cuda_graph": False})]


def mslr_shaped(num_queries: int, max_docs: int, seed: int = 0) -> RankingData:
    """Queries whose document counts follow a log-normal around MSLR_MEAN_DOCS, one of them `max_docs` long."""
    rng = np.random.default_rng(seed)
    counts = np.clip(np.rint(rng.lognormal(np.log(MSLR_MEAN_DOCS) - 0.245, 0.7, num_queries)), 1, max_docs)
    counts[0] = max_docs
    documents = generate(1, int(counts.sum()), MSLR_FEATURES, seed)  # one long query, cut into queries below
    return RankingData(documents.features, documents.labels, np.concatenate([[0], np.cumsum(counts)]).astype(np.int64))


def measure(session: Session, forced: str, changes: dict, windows: StepWindows) -> tuple[float, str]:
    """The median step rate of one variant and its path line."""
    previous = os.environ.pop(fast_paths.FORCE_VARIABLE, None)
    if forced:
        os.environ[fast_paths.FORCE_VARIABLE] = forced
    try:
        config = dataclasses.replace(session.config, train=dataclasses.replace(session.config.train, **changes))
        harness = NativeHarness.build(dataclasses.replace(session, config=config), total_steps=windows.total_steps)
        harness.run(windows.total_steps, on_step=windows.step_done)
        line = harness.path.describe()
    finally:
        os.environ.pop(fast_paths.FORCE_VARIABLE, None)
        if previous is not None:
            os.environ[fast_paths.FORCE_VARIABLE] = previous
    del harness  # its CUDA graph's memory pool goes with it
    if session.device.type == "cuda":
        torch.cuda.empty_cache()
    return statistics.median(windows.steps_per_window / seconds for seconds in windows.window_seconds), line


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=4000, help="training queries held on the device")
    parser.add_argument("--max-docs", type=int, default=MSLR_MAX_DOCS, help="the longest query's documents")
    parser.add_argument("--warmup-steps", type=int, default=30)
    parser.add_argument("--steps-per-window", type=int, default=300)
    parser.add_argument("--windows", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=2, help="rounds of the three variants, interleaved")
    parser.add_argument("--doc", type=Path, default=BENCHMARKS_DOC)
    args = parser.parse_args(argv)
    device = torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
    training = mslr_shaped(args.queries, args.max_docs)
    validation = mslr_shaped(16, args.max_docs, seed=1)
    train_config = TrainConfig(log_every=10**9, checkpoint_every=0)
    session = session_over(training, validation, benchmark_model(SHIPPED_MODEL, SHIPPED_WIDTH, MSLR_FEATURES), train_config,
                           detect_topology({}), device)
    documents_per_step = len(training.labels) / training.num_queries * train_config.batch_size
    rates: dict[str, list[float]] = {name: [] for name, _, _ in VARIANTS}
    lines: dict[str, str] = {}
    for _ in range(args.repeats):
        for name, forced, changes in VARIANTS:
            windows = StepWindows(args.warmup_steps, args.steps_per_window, args.windows, device)
            rate, lines[name] = measure(session, forced, changes, windows)
            rates[name].append(rate)
            print(f"{name}: {rate:,.0f} steps/s | {lines[name]}", flush=True)
    medians = {name: statistics.median(rates[name]) for name in rates}
    rows = [[name, f"{medians[name]:,.0f}", f"{medians[name] * documents_per_step:,.0f}",
             f"{medians[name] / medians['fast path']:.0%}", ", ".join(f"{rate:,.0f}" for rate in rates[name]),
             f"`{lines[name]}`"] for name, _, _ in VARIANTS]
    table = markdown_table(["variant", "steps/s (median)", "documents/s", "vs fast path", "each round",
                            "path the run logged"], rows)
    share = medians["as torch 2.2"] / medians["fast path"]
    verdict = f"as torch 2.2: {share:.0%} of the fast path's step rate (target {TARGET:.0%}: " \
              f"{'met' if share >= TARGET else 'NOT met'})"
    print(table)
    print(verdict)
    machine = torch.cuda.get_device_name(0) if device.type == "cuda" else "CPU (smoke run)"
    data = (f"{args.queries} training queries, {len(training.labels):,} documents ({documents_per_step:.0f} per step on "
            f"average), padded to {args.max_docs}")
    body = (f"{provenance(f'{machine}; torch {torch.__version__}')}\n{model_line([SHIPPED_MODEL])}\n- Data: {data}\n\n"
            f"{table}\n\n{verdict}\n")
    write_section("gpu-portable-path", "The path a torch 2.2 container takes against the fast path (1 GPU, shipped "
                  "defaults)", body, doc=args.doc)


if __name__ == "__main__":
    main()
