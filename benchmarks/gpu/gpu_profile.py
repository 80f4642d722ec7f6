"""Where a training step's GPU time goes: kernel classes, idle gaps, and how much communication hides under compute.

    torchrun --nproc_per_node N -m benchmarks.gpu.gpu_profile --trainers native,lightning --widths 1024,4096

Runs a project trainer's real step (the set-up of benchmarks.gpu.project_trainers) through warm-up, records `--steps`
steps with torch.profiler, writes each rank's Chrome trace, and prints rank 0's breakdown per step: wall time, time
the compute stream is busy, the sum of kernel time per class, and NCCL time hidden under compute versus exposed.
It explains the figures benchmarks.gpu.gpu_scaling measures; it is not a throughput measurement (tracing adds overhead).
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import tempfile
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

import torch

from benchmarks.harness.project_code import DOCS_PER_QUERY
from benchmarks.harness.models import MODELS, PLAIN_MLP, benchmark_model
from benchmarks.gpu.project_trainers import benchmark_session, join_process_group, run_project_trainer
import sagemaker_distributed as distributed

KERNEL_CLASSES = (  # first match wins
    ("communication", re.compile(r"nccl", re.I)),
    ("matrix products", re.compile(r"gemm|nvjet|cutlass|xmma|sm90_|cublas", re.I)),
    ("optimizer", re.compile(r"adam|multi_tensor", re.I)),
)

Interval = tuple[float, float]


def kernel_class(name: str) -> str:
    return next((label for label, pattern in KERNEL_CLASSES if pattern.search(name)), "elementwise and reductions")


def union(intervals: Iterable[Interval]) -> list[Interval]:
    merged: list[Interval] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def covered(intervals: list[Interval]) -> float:
    return sum(end - start for start, end in intervals)


def intersection(a: list[Interval], b: list[Interval]) -> float:
    """Total length covered by both of two merged interval lists."""
    total, i, j = 0.0, 0, 0
    while i < len(a) and j < len(b):
        total += max(0.0, min(a[i][1], b[j][1]) - max(a[i][0], b[j][0]))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def breakdown(trace: dict, steps: int) -> tuple[list[tuple[str, float]], list[tuple[str, float, int]]]:
    """Per-step figures (ms) from a Chrome trace's kernel events, and the heaviest kernels."""
    kernels = [event for event in trace["traceEvents"] if event.get("cat") == "kernel" and event.get("ph") == "X"]
    if not kernels:
        raise SystemExit("the trace holds no GPU kernels: profile on a GPU machine")
    per_class: dict[str, float] = defaultdict(float)
    per_name: dict[str, list[float]] = defaultdict(list)
    compute, communication = [], []
    for event in kernels:
        start, duration, label = float(event["ts"]), float(event["dur"]), kernel_class(event["name"])
        per_class[label] += duration
        per_name[event["name"]].append(duration)
        (communication if label == "communication" else compute).append((start, start + duration))
    compute_busy, comm_busy = union(compute), union(communication)
    span = max(end for _, end in compute + communication) - min(start for start, _ in compute + communication)
    hidden = intersection(compute_busy, comm_busy)
    ms = 1e-3 / steps
    rows = [("wall time", span * ms), ("compute stream busy", covered(compute_busy) * ms),
            ("GPU idle (no kernel running)", (span - covered(union(compute + communication))) * ms)]
    rows += [(f"kernels: {label}", total * ms) for label, total in sorted(per_class.items(), key=lambda kv: -kv[1])]
    if communication:
        rows += [("NCCL hidden under compute", hidden * ms), ("NCCL exposed", (covered(comm_busy) - hidden) * ms)]
    heaviest = sorted(((name, sum(times) * ms, len(times) // steps) for name, times in per_name.items()),
                      key=lambda row: -row[1])[:15]
    return rows, heaviest


def profile_steps(trainer_name: str, model: str, width: int, batch_size: int, warmup: int, steps: int,
                  trace_path: Path, cuda_graph: bool) -> None:
    topology = distributed.detect_topology()
    device = distributed.device_for(topology)
    session = benchmark_session(benchmark_model(model, width, 136), batch_size // DOCS_PER_QUERY, topology, device,
                                warmup + steps + 1, cuda_graph=cuda_graph)
    activities = [torch.profiler.ProfilerActivity.CUDA] if device.type == "cuda" else []
    profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU, *activities],
                                      schedule=torch.profiler.schedule(wait=0, warmup=warmup, active=steps),
                                      on_trace_ready=lambda prof: prof.export_chrome_trace(str(trace_path)))
    done = 0

    def step_done() -> None:
        nonlocal done
        done += 1
        if device.type == "cuda" and done in (warmup, warmup + steps):
            torch.cuda.synchronize(device)  # the trace then holds exactly the recorded steps' kernels
        profiler.step()

    with profiler:
        run_project_trainer(trainer_name, session, warmup + steps, step_done)


def report(label: str, trace: dict, steps: int) -> None:
    rows, heaviest = breakdown(trace, steps)
    print(f"## {label}: per step, ms")
    print("\n".join(f"{name:<40} {value:8.3f}" for name, value in rows))
    print("heaviest kernels (ms per step, launches per step):")
    print("\n".join(f"  {value:8.3f} {count:4d}  {name[:110]}" for name, value, count in heaviest), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trainers", default="native,lightning", help="comma-separated: native, lightning")
    parser.add_argument("--model", default=PLAIN_MLP, choices=MODELS)
    parser.add_argument("--widths", default="1024,4096")
    parser.add_argument("--batch-size", type=int, default=8192, help="documents per GPU per step")
    parser.add_argument("--warmup-steps", type=int, default=15)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--eager", action="store_true", help="profile the eager step instead of the CUDA graph")
    parser.add_argument("--trace-dir", type=Path, default=Path(tempfile.mkdtemp(prefix="gpu-profile-")))
    args = parser.parse_args()
    topology = distributed.detect_topology()
    device = distributed.device_for(topology)
    join_process_group(topology, device)
    args.trace_dir.mkdir(parents=True, exist_ok=True)
    for trainer_name in args.trainers.split(","):
        for width in (int(w) for w in args.widths.split(",")):
            label = f"{trainer_name}-w{width}-{topology.world_size}gpu" + ("-eager" if args.eager else "")
            trace_path = args.trace_dir / f"{label}-rank{topology.rank}.json"
            profile_steps(trainer_name, args.model, width, args.batch_size, args.warmup_steps, args.steps,
                          trace_path, not args.eager)
            if topology.is_main:
                report(label, json.loads(trace_path.read_text()), args.steps)
            with gzip.open(trace_path.with_suffix(".json.gz"), "wt") as packed:  # a tenth of the size, to copy back
                packed.write(trace_path.read_text())
            trace_path.unlink()
    distributed.shutdown()


if __name__ == "__main__":
    main()
