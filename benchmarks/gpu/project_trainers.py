"""The project's two trainers (native and Lightning) under the benchmark's timing protocol.

The native trainer runs the package's own hot path (benchmarks.gpu.native_harness: device-resident queries,
index-gathered batches, fused bf16 layers, fused AdamW, gradients reduced by FusedDataParallel, the step replayed as a
CUDA graph);
the Lightning trainer runs train_lightning.py's Trainer and RankingModule (automatic optimization, bf16-mixed, DDP,
fused AdamW) on the same device-resident queries: synthetic queries of 32 documents, so a batch of 8192 samples is 256
whole queries. `--model` names the model (benchmarks.harness.models: `plain MLP`, the default, or `shipped model`),
`--eager` turns the native step's CUDA graph off, `--compile` runs the model through torch.compile.

Launch: torchrun --nproc_per_node N -m benchmarks.gpu.project_trainers --trainer native [--model "shipped model"] \
            [--eager] [--compile] --results results.jsonl
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch

from benchmarks.baselines.common import parse_args
from benchmarks.harness.models import PLAIN_MLP, benchmark_model
from benchmarks.harness.project_code import DOCS_PER_QUERY
from benchmarks.gpu.project_variants import PROJECT_TRAINERS, REDUCTION_ABLATIONS
from benchmarks.harness.timing import StepWindows, append_result, summarise
import sagemaker_distributed as distributed
from ranker.training import engine
from ranker.gpu import fast_paths
from ranker.config import ModelConfig, PathSwitches, TrainConfig
from sagemaker_distributed import Topology
from ranker.training.session import Session
from benchmarks.gpu.native_harness import NativeHarness, synthetic_session


def benchmark_session(model: ModelConfig, batch_queries: int, topology: Topology, device: torch.device,
                      batches_of_data: int, **train_changes) -> Session:
    """`model` (benchmarks.harness.models.benchmark_model) on synthetic queries of DOCS_PER_QUERY documents, with a
    training config that never logs or checkpoints; `train_changes` set other TrainConfig fields."""
    train = TrainConfig(batch_size=batch_queries, log_every=10**9, checkpoint_every=0, **train_changes)
    return synthetic_session(model, train, topology, device, docs_per_query=DOCS_PER_QUERY,
                             batches_of_data=batches_of_data, work_dir=Path(tempfile.mkdtemp(prefix="bench-")))


def join_process_group(topology: Topology, device: torch.device) -> None:
    """The process group every benchmark trainer runs in (NCCL on GPU, gloo on CPU), set up for the path the
    default TrainConfig takes (ranker.gpu.fast_paths)."""
    backend = "nccl" if device.type == "cuda" else "gloo"
    path = fast_paths.choose(TrainConfig(), device.type, topology.world_size, backend)
    distributed.init_process_group(backend, topology=topology, device=device, bind_device=path.bind_device)


def run_project_trainer(trainer_name: str, session: Session, steps: int, on_step: Callable[[], None]) -> None:
    """`steps` optimizer steps of one of PROJECT_TRAINERS, calling `on_step` after each."""
    if trainer_name not in PROJECT_TRAINERS:
        raise SystemExit(f"trainer: {trainer_name!r} is not one of {', '.join(PROJECT_TRAINERS)}")
    if trainer_name == "lightning":
        # Imported here: `import lightning` costs ~5 s of CPU, which every native rank and every benchmark that only
        # borrows this module's session and process group (data_parallel_library, gpu_checks, ...) would pay.
        from benchmarks.gpu.lightning_trainer import run_lightning

        run_lightning(session, steps, on_step)
    else:
        # The run's own learning-rate schedule, as the Lightning run has: the weights' values move the GEMMs' power
        # draw and with it their clock, so both trainers must follow the same trajectory.
        NativeHarness.build(session, total_steps=steps).run(steps, on_step=on_step)


def take_option(name: str, default: str | None = None) -> str | None:
    """Removes `name VALUE` from the command line (the rest is the naive baselines' shared one) and returns VALUE."""
    if name not in sys.argv:
        return default
    index = sys.argv.index(name)
    value = sys.argv[index + 1]
    del sys.argv[index:index + 2]
    return value


def main() -> None:
    trainer_name = take_option("--trainer")
    model_name = take_option("--model", PLAIN_MLP)
    eager = "--eager" in sys.argv  # the CUDA-graph ablation: both trainers replay a captured step by default
    if eager:
        sys.argv.remove("--eager")
    compiled = "--compile" in sys.argv  # torch.compile of the model (turns the native step's CUDA graph off)
    if compiled:
        sys.argv.remove("--compile")
    args = parse_args(__doc__)
    if args.batch_size % DOCS_PER_QUERY:
        raise SystemExit(f"--batch-size: {args.batch_size} is not a multiple of {DOCS_PER_QUERY} documents per query")
    topology = distributed.detect_topology()
    device = distributed.device_for(topology)
    join_process_group(topology, device)
    for width in args.widths:
        windows = StepWindows(args.warmup_steps, args.steps_per_window, args.windows, device)
        # One epoch covers the whole run, so the Lightning loop's end-of-epoch validation stays out of the timing.
        session = benchmark_session(benchmark_model(model_name, width, args.features), args.batch_size // DOCS_PER_QUERY,
                                    topology, device, windows.total_steps + 1, cuda_graph=not eager, compile=compiled,
                                    switches=PathSwitches(**REDUCTION_ABLATIONS.get(trainer_name, {})))
        run_project_trainer(trainer_name, session, windows.total_steps, windows.step_done)
        path = engine.training_path(session.config.train, device, topology.world_size).describe()
        result = summarise(trainer_name, model_name, width, args.features, args.batch_size, windows, path)
        if topology.is_main:
            append_result(args.results, result)
            print(f"{trainer_name} {model_name} width={width} world={result.world_size} "
                  f"samples/s={result.samples_per_second:,.0f}")
    distributed.shutdown()


if __name__ == "__main__":
    main()
