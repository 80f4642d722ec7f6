"""Checks of the GPU-only paths, for a GPU machine (CI has none): the CUDA-graphed step trains like the eager one.

    python -m benchmarks.gpu_checks                                   # one GPU
    torchrun --nproc_per_node 2 -m benchmarks.gpu_checks              # DDP's all-reduce inside the graph

From the same initial weights and batches, runs the eager step and the captured step for `--steps` steps (past the
warm-up and the capture, through the learning-rate warm-up) and compares every rank's weights and summed loss.
Exits 1 when they differ beyond bf16 round-off, so a device run can gate on it.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import torch

from benchmarks.project_code import DOCS_PER_QUERY
from ranker import distributed, engine
from ranker.config import ModelConfig, TrainConfig
from ranker.throughput import NativeHarness, synthetic_session


def train(cuda_graph: bool, width: int, steps: int) -> tuple[dict[str, torch.Tensor], float]:
    topology = distributed.detect_topology()
    device = distributed.device_for(topology)
    model = ModelConfig(num_features=136, width=width, norm="none", dropout=0.0)
    train_config = TrainConfig(batch_size=64, cuda_graph=cuda_graph, warmup_fraction=0.5)
    session = synthetic_session(model, train_config, topology, device, docs_per_query=DOCS_PER_QUERY,
                                batches_of_data=steps, work_dir=Path(tempfile.mkdtemp(prefix="gpu-checks-")))
    torch.manual_seed(0)
    harness = NativeHarness.build(session, total_steps=steps)
    loss_sum = harness.run(steps)
    weights = {name: value.detach().float().cpu() for name, value in engine.unwrap(harness.model).state_dict().items()}
    return weights, float(loss_sum)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--tolerance", type=float, default=1e-3, help="largest weight difference allowed")
    args = parser.parse_args()
    topology = distributed.detect_topology()
    device = distributed.device_for(topology)
    if device.type != "cuda":
        raise SystemExit("gpu_checks: no GPU here; run it on a GPU machine")
    distributed.init_process_group(topology, "nccl", device)
    eager_weights, eager_loss = train(False, args.width, args.steps)
    graph_weights, graph_loss = train(True, args.width, args.steps)
    largest = max((eager_weights[name] - graph_weights[name]).abs().max().item() for name in eager_weights)
    moved = max((eager_weights[name]).abs().max().item() for name in eager_weights)
    passed = largest <= args.tolerance and abs(eager_loss - graph_loss) <= args.tolerance * max(1.0, abs(eager_loss))
    print(f"rank {topology.rank}/{topology.world_size}: CUDA-graphed vs eager step after {args.steps} steps: "
          f"largest weight difference {largest:.2e} (largest weight {moved:.2f}), summed loss {graph_loss:.6f} vs "
          f"{eager_loss:.6f}: {'PASS' if passed else 'FAIL'}", flush=True)
    distributed.shutdown()
    sys.exit(0 if passed else 1)


if __name__ == "__main__":
    main()
