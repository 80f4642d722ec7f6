"""The project's two trainers (native DDP and Lightning) under the benchmark's timing protocol.

Both run the package's own hot path (ranker.throughput: device-resident queries, index-gathered batches, bf16
autocast, fused AdamW, DDP with bucket views and a static graph) on synthetic queries of 32 documents, so a
batch of 8192 samples is 256 whole queries.

Launch: torchrun --nproc_per_node N -m benchmarks.project_trainers --trainer native --results results.jsonl
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from benchmarks.baselines.common import parse_args
from benchmarks.lightning_timing import WindowTimer
from benchmarks.project_code import DOCS_PER_QUERY
from benchmarks.timing import StepWindows, append_result, summarise
from ranker import distributed
from ranker.config import ModelConfig, TrainConfig
from ranker.lightning_module import RankingModule
from ranker.throughput import NativeHarness, synthetic_session
from train_lightning import build_trainer


def main() -> None:
    trainer_name = sys.argv.pop(sys.argv.index("--trainer") + 1)
    sys.argv.remove("--trainer")
    eager = "--eager" in sys.argv  # the CUDA-graph ablation: both trainers replay a captured step by default
    if eager:
        sys.argv.remove("--eager")
    args = parse_args(__doc__)
    if args.batch_size % DOCS_PER_QUERY:
        raise SystemExit(f"--batch-size: {args.batch_size} is not a multiple of {DOCS_PER_QUERY} documents per query")
    topology = distributed.detect_topology()
    device = distributed.device_for(topology)
    distributed.init_process_group(topology, "nccl" if device.type == "cuda" else "gloo", device)
    for width in args.widths:
        windows = StepWindows(args.warmup_steps, args.steps_per_window, args.windows, device)
        model = ModelConfig(num_features=args.features, width=width, norm="none", dropout=0.0)
        # The bf16 variant is the ablation of gradient compression (fp32, DDP's own path, is the default).
        allreduce_dtype = "bf16" if trainer_name == "native-bf16-allreduce" else "fp32"
        train = TrainConfig(batch_size=args.batch_size // DOCS_PER_QUERY, log_every=10**9, checkpoint_every=0,
                            allreduce_dtype=allreduce_dtype, cuda_graph=not eager)
        # One epoch covers the whole run, so the Lightning loop's end-of-epoch validation stays out of the timing.
        session = synthetic_session(model, train, topology, device, docs_per_query=DOCS_PER_QUERY,
                                    batches_of_data=windows.total_steps + 1,
                                    work_dir=Path(tempfile.mkdtemp(prefix="bench-")))
        if trainer_name in ("native", "native-bf16-allreduce"):
            # The same learning-rate schedule as the Lightning run: the weights' values move the GEMMs' power draw
            # and with it their clock, so both trainers must follow the same trajectory.
            NativeHarness.build(session, total_steps=windows.total_steps).run(windows.total_steps,
                                                                               on_step=windows.step_done)
        elif trainer_name == "lightning":
            module = RankingModule(session, session.training_batches(), windows.total_steps)
            trainer = build_trainer(session, windows.total_steps)
            trainer.callbacks.append(WindowTimer(windows))
            trainer.fit(module)
        else:
            raise SystemExit(f"--trainer: {trainer_name!r} is not one of native, native-bf16-allreduce, lightning")
        result = summarise(trainer_name, width, args.features, args.batch_size, windows)
        if topology.is_main:
            append_result(args.results, result)
            print(f"{trainer_name} width={width} world={result.world_size} samples/s={result.samples_per_second:,.0f}")
    distributed.shutdown()


if __name__ == "__main__":
    main()
