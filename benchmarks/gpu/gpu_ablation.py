"""What each optimisation of the native training step is worth, one at a time, on one GPU.

    python -m benchmarks.gpu.gpu_ablation [--widths 1024,4096]

Starting from the project's step (a CUDA-graphed step over device-resident queries gathered by index, bf16 autocast,
fused AdamW), each
variant changes one thing and is timed in the same process under the same protocol as benchmarks/gpu/gpu_scaling.py.
The prediction beside each variant was written down before the measurement (METHOD: predict, change, measure).
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path

import torch

from benchmarks.harness.models import PLAIN_MLP, benchmark_model, model_line
from benchmarks.harness.project_code import DOCS_PER_QUERY
from benchmarks.gpu.project_trainers import benchmark_session
from benchmarks.harness.report import BENCHMARKS_DOC, markdown_table, provenance, write_section
from benchmarks.harness.timing import StepWindows, summarise
from ranker.training import engine
from ranker.data.batches import Batch, DeviceQueries, QueryBatches
from ranker.config import PathSwitches
from sagemaker_distributed import detect_topology
from ranker.training.session import Session
from benchmarks.gpu.native_harness import NativeHarness


class HostQueryBatches(QueryBatches):
    """The same batches, gathered on the host from pinned memory and copied to the device every step."""

    def __init__(self, queries: DeviceQueries, batch_size: int, device: torch.device):
        host = DeviceQueries(*(tensor.cpu().pin_memory() if device.type == "cuda" else tensor.cpu()
                               for tensor in (queries.features, queries.labels, queries.mask)))
        super().__init__(host, batch_size)
        self.device = device

    def epoch_batches(self, epoch: int, start_step: int = 0) -> Iterator[Batch]:
        for batch in super().epoch_batches(epoch, start_step):
            yield tuple(tensor.to(self.device, non_blocking=True) for tensor in batch)


def unfused_adamw(session: Session) -> NativeHarness:
    harness = NativeHarness.build(session)
    optimizer = torch.optim.AdamW(harness.model.parameters(), lr=1e-3, weight_decay=0.01, foreach=True)
    scheduler = engine.build_scheduler(optimizer, 10_000, session.config.train)
    return dataclasses.replace(harness, optimizer=optimizer, scheduler=scheduler)


def host_batches(session: Session) -> NativeHarness:
    harness = NativeHarness.build(session)
    queries = harness.batches.queries
    return dataclasses.replace(harness, batches=HostQueryBatches(queries, harness.batches.batch_size, harness.device))


# (name, what changes, prediction written before measuring, how the train config changes, how the harness is built).
# The project step replays a CUDA graph; each variant changes one thing from it.
VARIANTS: list[tuple[str, str, str, dict, Callable[[Session], NativeHarness]]] = [
    ("project step", "CUDA-graphed step: device-resident index batches, fused bf16 layers, fused AdamW", "reference",
     {}, NativeHarness.build),
    ("eager step instead of a CUDA graph", "~150 kernel launches from Python per step",
     "-50..-65% at 1024 (launch-bound), -2% at 4096", {"cuda_graph": False}, NativeHarness.build),
    ("autocast Linear + ReLU instead of fused layers", "separate ReLU pass, bf16 weight gradients cast to float32",
     "-6% at 4096 (two extra memory passes per layer), -3% at 1024", {"switches": PathSwitches(fused_layers=False)},
     NativeHarness.build),
    ("fp32 instead of bf16", "no autocast: float32 matmuls", "~8x slower at 4096 (no tensor cores); ~3x at 1024",
     {"precision": "fp32"}, NativeHarness.build),
    ("foreach AdamW instead of fused", "optimizer as a list of kernels (replayed)",
     "-10% at 4096 (more memory passes), -5% at 1024 (no launch cost left)", {}, unfused_adamw),
    ("host batches instead of device-resident", "gather on the host, pinned copy each step",
     "-8% at 4096, -40% at 1024 (the host gather now sits in front of a 1 ms step)", {}, host_batches),
    ("torch.compile instead of a CUDA graph", "Inductor fuses ReLU, casts and the loss; eager launches",
     "-55% at 1024 (launch-bound again), +1% at 4096", {"compile": True}, NativeHarness.build),
]


def measure(width: int, batch_queries: int, windows_args: tuple[int, int, int], device: torch.device,
            train_changes: dict, build: Callable[[Session], NativeHarness]) -> tuple[float, str]:
    """The variant's samples/s and the path it ran (ranker.gpu.fast_paths)."""
    windows = StepWindows(*windows_args, device)
    session = benchmark_session(benchmark_model(PLAIN_MLP, width, 136), batch_queries, detect_topology(), device,
                                batches_of_data=8, **train_changes)
    harness = build(session)
    harness.run(windows.total_steps, on_step=windows.step_done)
    return (summarise("native", PLAIN_MLP, width, 136, batch_queries * DOCS_PER_QUERY, windows).samples_per_second,
            harness.path.taken())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--widths", default="1024,4096")
    parser.add_argument("--batch-size", type=int, default=8192, help="documents per step (32 per query)")
    parser.add_argument("--warmup-steps", type=int, default=15)
    parser.add_argument("--steps-per-window", type=int, default=20)
    parser.add_argument("--windows", type=int, default=5)
    parser.add_argument("--doc", type=Path, default=BENCHMARKS_DOC)
    args = parser.parse_args(argv)
    device = torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
    windows_args = (args.warmup_steps, args.steps_per_window, args.windows)
    rows = []
    for width in (int(w) for w in args.widths.split(",")):
        reference = None
        for name, change, prediction, train_changes, build in VARIANTS:
            try:
                rate, path = measure(width, args.batch_size // DOCS_PER_QUERY, windows_args, device, train_changes,
                                     build)
            except Exception as error:  # a variant that cannot run here is a result too, not a crash of the table
                rows.append([name, width, change, prediction, f"failed: {type(error).__name__}: {error}"[:120], "-",
                             "-"])
                continue
            reference = reference or rate
            rows.append([name, width, change, prediction, f"{rate:,.0f}", f"{rate / reference - 1:+.1%}", path])
            print(f"{name} width={width}: {rate:,.0f} samples/s ({path})", flush=True)
    table = markdown_table(["variant", "width", "what changes", "prediction", "samples/s", "vs project step",
                            "path taken"], rows)
    print(table)
    machine = torch.cuda.get_device_name(0) if device.type == "cuda" else "CPU (smoke run)"
    body = f"{provenance(f'{machine}; torch {torch.__version__}')}\n{model_line([PLAIN_MLP])}\n\n{table}\n"
    write_section("gpu-ablation", "What each optimisation is worth (1 GPU, native step)", body, doc=args.doc)


if __name__ == "__main__":
    main()
