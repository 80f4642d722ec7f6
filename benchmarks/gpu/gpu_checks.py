"""Checks of the GPU-only paths, for a GPU machine (CI has none): the CUDA-graphed step trains exactly like the
eager one, the fused bf16 layers (ranker.gpu.fused_linear) train like autocast's Linear + ReLU, the fused per-feature
embedding's compiled kernels (ranker.gpu.fused_embedding) compute what the modules compute (in float32 to float32
round-off; in bf16 as close to the float32 modules as autocast's modules are) and a shipped model trains alike with and
without them, and on several GPUs
FusedDataParallel's reduction with its sharded update trains like DDP's and like its own unsharded update, and leaves
every rank with the same weights.

    python -m benchmarks.gpu.gpu_checks                                   # one GPU
    torchrun --nproc_per_node 2 -m benchmarks.gpu.gpu_checks              # the all-reduce inside the graph

From the same initial weights and batches, runs the eager step and the captured step for `--steps` steps (past the
warm-up and the capture, through the learning-rate warm-up) and compares every rank's weights and summed loss: they
must be equal to round-off. Then the eager step with plain autocast layers: its summed loss must agree to 1%
(bf16 sums in a different order drift apart slowly); the shipped model's captured float32 step with the fused embedding
against the same step with the embedding's modules likewise. On several GPUs, the captured step with DDP in place of
FusedDataParallel, and with the update unsharded, must each end within `--tolerance` of it, and rank 0's weights must
equal every other rank's. Exits 1 on any failure, so a device run can gate on it.
"""

from __future__ import annotations

import argparse
import sys

import torch

from benchmarks.harness.models import PLAIN_MLP, SHIPPED_MODEL, SHIPPED_WIDTH, benchmark_model
from benchmarks.gpu.project_trainers import benchmark_session, join_process_group
import sagemaker_distributed as distributed
from ranker.training import engine
from ranker.config import PathSwitches
from ranker.gpu.fused_data_parallel import FusedDataParallel
from ranker.gpu.fused_embedding import fused_feature_embedding
from benchmarks.gpu.native_harness import NativeHarness


def train(cuda_graph: bool, width: int, steps: int, fused: bool = True, model: str = PLAIN_MLP,
          fused_embedding: bool = True, precision: str = "bf16",
          **reduction) -> tuple[dict[str, torch.Tensor], float, bool]:
    """`reduction`: PathSwitches changes to the gradient reduction (`data_parallel="ddp"`, `shard_optimizer=False`).
    Returns the weights, the summed loss and whether the AdamW update was sharded across the ranks."""
    topology = distributed.detect_topology()
    device = distributed.device_for(topology)
    switches = PathSwitches(fused_layers=fused, fused_embedding=fused_embedding, **reduction)
    session = benchmark_session(benchmark_model(model, width, 136), 64, topology, device, batches_of_data=steps,
                                cuda_graph=cuda_graph, warmup_fraction=0.5, precision=precision, switches=switches)
    torch.manual_seed(0)
    harness = NativeHarness.build(session, total_steps=steps)
    loss_sum = harness.run(steps)
    weights = {name: value.detach().float().cpu() for name, value in engine.unwrap(harness.model).state_dict().items()}
    sharded = isinstance(harness.model, FusedDataParallel) and harness.model.shard_optimizer
    return weights, float(loss_sum), sharded


def largest_difference(first: dict[str, torch.Tensor], second: dict[str, torch.Tensor]) -> float:
    return max((first[name] - second[name]).abs().max().item() for name in first)


def relative_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    return ((actual.float() - expected.float()).abs().max() / expected.float().abs().max().clamp(min=1e-12)).item()


def embedding_errors(device: torch.device) -> dict[str, tuple[float, float]]:
    """Largest relative error of the output and of the parameters' gradients, against the float32 modules, of: the
    fused kernels in float32 (`fused fp32`) and in bf16 (`fused bf16`), and the modules under bf16 autocast
    (`modules bf16`, the bf16 path the fused one replaces); on a fitted shipped model and 64 queries of 32 documents.
    bf16 gradients through 8 layers are far from float32 ones on either path (ReLU masks flip): what matters is that
    the fused bf16 path is about as close as the modules' bf16 path."""
    session = benchmark_session(benchmark_model(SHIPPED_MODEL, SHIPPED_WIDTH, 136), 64, distributed.detect_topology(),
                                device, batches_of_data=1)
    model = session.build_model()
    torch.manual_seed(1)
    for name, parameter in model.embedding.named_parameters():
        if name.endswith("bias"):  # zero at initialisation: give the biases' gradients something to check
            torch.nn.init.normal_(parameter, std=0.5)
    features = session.train.features[:64]
    parameters = list(model.embedding.parameters())
    truth = model.inputs(features)
    upstream = torch.randn(truth.shape, device=device)
    expected = torch.autograd.grad(truth, parameters, upstream)
    with engine.autocast(device, "bf16"):
        autocast_modules = model.inputs(features)
    outputs = {"modules bf16": autocast_modules,
               "fused bf16": fused_feature_embedding(features, model.encoding, model.embedding, "bf16"),
               "fused fp32": fused_feature_embedding(features, model.encoding, model.embedding, "fp32")}
    errors = {}
    for name, output in outputs.items():
        grads = torch.autograd.grad(output, parameters, upstream.to(output.dtype))
        errors[name] = (relative_error(output, truth), max(relative_error(g, e) for g, e in zip(grads, expected)))
    return errors


def check_fused_embedding(device: torch.device, steps: int) -> tuple[str, bool]:
    """The fused embedding's kernels against the modules (outputs and gradients, both precisions), and the shipped
    model's captured training with and without them."""
    errors = embedding_errors(device)
    exact = max(errors["fused fp32"]) <= 1e-4
    # As close as autocast's modules, within 2.5 times their error (seen: 0.5-1.9 times, gradient by gradient)
    as_close = all(fused <= max(2.5 * modules, 1e-2)
                   for fused, modules in zip(errors["fused bf16"], errors["modules bf16"]))
    results = ["embedding vs the float32 modules (output, gradients): "
               + ", ".join(f"{name} {output:.1e}, {gradient:.1e}" for name, (output, gradient) in errors.items())
               + f": fused fp32 exact {'PASS' if exact else 'FAIL'}, fused bf16 as close as the modules' bf16 "
               f"{'PASS' if as_close else 'FAIL'}"]
    _, fused_loss, _ = train(True, SHIPPED_WIDTH, steps, model=SHIPPED_MODEL, precision="fp32")
    _, modules_loss, _ = train(True, SHIPPED_WIDTH, steps, model=SHIPPED_MODEL, fused_embedding=False,
                               precision="fp32")
    trains_alike = abs(fused_loss - modules_loss) <= 0.02 * abs(modules_loss)
    results.append(f"shipped model trained in float32 with vs without the fused embedding: summed loss "
                   f"{fused_loss:.6f} vs {modules_loss:.6f}: {'PASS' if trains_alike else 'FAIL'}")
    return "; ".join(results), exact and as_close and trains_alike


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
    embedding_report, embedding_passed = check_fused_embedding(device, args.steps)
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
    report += f"; {embedding_report}"
    passed = graph_passed and fused_passed and embedding_passed
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
