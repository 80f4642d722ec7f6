"""Checks of the GPU-only paths, for a GPU machine (CI has none): the CUDA-graphed step trains exactly like the
eager one, the fused bf16 layers (ranker.gpu.fused_linear) train like autocast's Linear + ReLU, and on several GPUs
FusedDataParallel's reduction with its sharded update trains like DDP's and like its own unsharded update, and leaves
every rank with the same weights.

    python -m benchmarks.gpu_checks                                   # one GPU
    torchrun --nproc_per_node 2 -m benchmarks.gpu_checks              # the all-reduce inside the graph

From the same initial weights and batches, runs the eager step and the captured step for `--steps` steps (past the
warm-up and the capture, through the learning-rate warm-up) and compares every rank's weights and summed loss: they
must be equal to round-off. Then the eager step with plain autocast layers: its summed loss must agree to 1%
(bf16 sums in a different order drift apart slowly). On several GPUs, the captured step with DDP in place of
FusedDataParallel, and with the update unsharded, must each end within `--tolerance` of it, and rank 0's weights must
equal every other rank's. Exits 1 on any failure, so a device run can gate on it.
"""

from __future__ import annotations

import argparse
import sys

import torch

from benchmarks.project_trainers import benchmark_session, join_process_group
import sagemaker_distributed as distributed
from ranker.training import engine
from ranker.config import PathSwitches
from ranker.gpu.fused_data_parallel import FusedDataParallel
from benchmarks.native_harness import NativeHarness


def train(cuda_graph: bool, width: int, steps: int, fused: bool = True,
          **reduction) -> tuple[dict[str, torch.Tensor], float, bool]:
    """`reduction`: PathSwitches changes to the gradient reduction (`data_parallel="ddp"`, `shard_optimizer=False`).
    Returns the weights, the summed loss and whether the AdamW update was sharded across the ranks."""
    topology = distributed.detect_topology()
    device = distributed.device_for(topology)
    session = benchmark_session(width, 64, topology, device, batches_of_data=steps, cuda_graph=cuda_graph,
                                warmup_fraction=0.5, switches=PathSwitches(fused_layers=fused, **reduction))
    torch.manual_seed(0)
    harness = NativeHarness.build(session, total_steps=steps)
    loss_sum = harness.run(steps)
    weights = {name: value.detach().float().cpu() for name, value in engine.unwrap(harness.model).state_dict().items()}
    sharded = isinstance(harness.model, FusedDataParallel) and harness.model.shard_optimizer
    return weights, float(loss_sum), sharded


def largest_difference(first: dict[str, torch.Tensor], second: dict[str, torch.Tensor]) -> float:
    return max((first[name] - second[name]).abs().max().item() for name in first)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # 2048: the layers fill several gradient buckets, so that on several GPUs the update is sharded (one bucket keeps
    # it whole, and the comparison with the unsharded update would compare a run with itself)
    parser.add_argument("--width", type=int, default=2048)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--tolerance", type=float, default=1e-3, help="largest weight difference allowed")
    args = parser.parse_args()
    topology = distributed.detect_topology()
    device = distributed.device_for(topology)
    if device.type != "cuda":
        raise SystemExit("gpu_checks: no GPU here; run it on a GPU machine")
    join_process_group(topology, device)
    eager_weights, eager_loss, _ = train(False, args.width, args.steps)
    graph_weights, graph_loss, sharded = train(True, args.width, args.steps)
    _, unfused_loss, _ = train(False, args.width, args.steps, fused=False)
    largest = largest_difference(eager_weights, graph_weights)
    graph_passed = largest <= args.tolerance and abs(eager_loss - graph_loss) <= args.tolerance * abs(eager_loss)
    fused_passed = abs(eager_loss - unfused_loss) <= 0.01 * abs(unfused_loss)
    report = (f"rank {topology.rank}/{topology.world_size}, {args.steps} steps: CUDA-graphed vs eager: largest weight "
              f"difference {largest:.2e}, summed loss {graph_loss:.6f} vs {eager_loss:.6f}: "
              f"{'PASS' if graph_passed else 'FAIL'}; fused vs autocast layers: summed loss {eager_loss:.6f} vs "
              f"{unfused_loss:.6f}: {'PASS' if fused_passed else 'FAIL'}")
    passed = graph_passed and fused_passed
    if topology.world_size > 1:
        rank0_weights = {name: value.to(device) for name, value in graph_weights.items()}
        for value in rank0_weights.values():
            torch.distributed.broadcast(value, src=0)
        versus_rank0 = largest_difference(graph_weights, {k: v.cpu() for k, v in rank0_weights.items()})
        for label, reduction in (("DDP", {"data_parallel": "ddp"}),
                                 ("the unsharded update", {"shard_optimizer": False})):
            other_weights, _, _ = train(True, args.width, args.steps, **reduction)
            versus_other = largest_difference(graph_weights, other_weights)
            reduction_passed = sharded and versus_other <= args.tolerance and versus_rank0 == 0
            report += (f"; FusedDataParallel ({'sharded' if sharded else 'NOT sharded: widen --width'} update) vs "
                       f"{label}: largest weight difference {versus_other:.2e}, vs rank 0's weights "
                       f"{versus_rank0:.2e}: {'PASS' if reduction_passed else 'FAIL'}")
            passed = passed and reduction_passed
    print(report, flush=True)
    distributed.shutdown()
    sys.exit(0 if passed else 1)


if __name__ == "__main__":
    main()
