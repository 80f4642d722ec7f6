"""Data parallelism for the model's fused dense layers: each layer's gradients are written by their GEMM straight into
the all-reduce buffer, and reduced as soon as they are all there. It takes DDP's place on GPU for the bf16 fused path
(engine.wrap_data_parallel); DDP stays for everything else (and everywhere with `--data-parallel ddp`).

What it saves over DDP (+4.8% samples/s at width 4096 on 2 H200s, docs/benchmarks.md):
- DDP hears that a gradient is ready only once autograd has accumulated it, after the layer's whole backward, input
  gradient included. Here a layer's backward computes its weight and bias gradients first and starts their
  all-reduce before the input gradient's GEMM, so the first layer's (the last to start) is not left exposed at the end.
- DDP then copies each gradient into its bucket, dividing by the world size on the way: a pass over all gradients.
  Here the gradient GEMM writes into the buffer itself and NCCL averages inside its kernel (`ReduceOp.AVG`).
Layers are grouped into buckets of at least BUCKET_BYTES in backward order, as DDP does: one all-reduce per 67 MB
layer at width 4096, a few instead of seven at width 1024, where each all-reduce's fixed cost shows.

Parameters outside the dense layers (LayerNorm's) take the ordinary autograd path and are reduced together once the
backward pass ends (they are small). Gradients are written, not accumulated: one backward pass per optimizer step.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors
from torch.autograd import Variable

from ranker.model import RankingMLP

BUCKET_BYTES = 25 * 2**20  # DDP's default bucket_cap_mb; 8 MB buckets were 4.5% slower at width 1024 on 2 H200s


class Bucket:
    """Consecutive layers (in backward order) whose gradients share one all-reduce over their part of the buffer."""

    def __init__(self, flat: torch.Tensor, layers: int):
        self.flat, self.layers, self.waiting = flat, layers, layers


class LayerGradients:
    """One dense layer's gradients: float32 views of the shared buffer that its backward writes into, and the call
    that tells its bucket they are written."""

    def __init__(self, owner: FusedDataParallel, layer: nn.Linear, flat: torch.Tensor, bucket: Bucket):
        self.owner, self.bucket = owner, bucket
        weights = layer.weight.numel()
        self.weight = flat[:weights].view_as(layer.weight)
        self.bias = flat[weights:].view_as(layer.bias) if layer.bias is not None else None

    def written(self) -> None:
        self.owner.written(self)


class FusedDataParallel(nn.Module):
    """Wraps a RankingMLP like DDP does (`.module`, rank 0's weights broadcast at construction, averaged gradients
    in `.grad` after backward), with the layers' gradients reduced as described in the module docstring. Trains
    through the fused layers (ranker.fused_linear) wherever gradients are recorded, whatever the device: on GPU that
    is the bf16 path the wrapper is chosen for; the CPU runs its tests."""

    def __init__(self, module: RankingMLP, bucket_bytes: int = BUCKET_BYTES):
        super().__init__()
        if not dist.is_initialized():
            raise RuntimeError("FusedDataParallel: initialise the process group first")
        self.module = module
        self.world_size = dist.get_world_size()
        # NCCL averages in its kernel; gloo (the CPU tests) sums, and the sum is divided once the backward ends.
        self.backend_averages = dist.get_backend() == "nccl"
        self.reduce_op = dist.ReduceOp.AVG if self.backend_averages else dist.ReduceOp.SUM
        parameters = list(module.parameters())
        if not all(parameter.requires_grad and parameter.dtype == torch.float32 for parameter in parameters):
            raise ValueError("FusedDataParallel: every parameter must be a trainable float32 tensor")
        backward_order = [layer for layer in module.modules() if isinstance(layer, nn.Linear)][::-1]
        in_layers = {id(parameter) for layer in backward_order for parameter in layer.parameters()}
        self.other_parameters = [parameter for parameter in parameters if id(parameter) not in in_layers]
        sizes = [sum(parameter.numel() for parameter in layer.parameters()) for layer in backward_order]
        self.buffer = torch.empty(sum(sizes), dtype=torch.float32, device=parameters[0].device)
        self.slots: dict[nn.Module, LayerGradients] = {}
        self.buckets: list[Bucket] = []
        start = 0
        for group in bucket_groups(sizes, bucket_bytes // self.buffer.element_size()):
            bucket = Bucket(self.buffer[start:start + sum(sizes[i] for i in group)], len(group))
            self.buckets.append(bucket)
            for index in group:
                self.slots[backward_order[index]] = LayerGradients(self, backward_order[index],
                                                                   self.buffer[start:start + sizes[index]], bucket)
                start += sizes[index]
        self.pending: list[dist.Work] = []
        self.in_backward = False
        for tensor in module.state_dict().values():  # every rank starts from rank 0's weights, as under DDP
            dist.broadcast(tensor, src=0)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        if torch.is_grad_enabled():
            return self.module.fused_forward(features, self.slots)
        return self.module(features)

    def written(self, slot: LayerGradients) -> None:
        """Called from a layer's backward once its gradients are in the buffer: once its bucket is complete, start the
        bucket's all-reduce (NCCL runs it on its own stream, after what the compute stream has queued so far) and let
        the compute go on."""
        if not self.in_backward:
            self.in_backward = True
            Variable._execution_engine.queue_callback(self._finish_backward)
        slot.bucket.waiting -= 1
        if slot.bucket.waiting == 0:
            self.pending.append(dist.all_reduce(slot.bucket.flat, op=self.reduce_op, async_op=True))

    def _finish_backward(self) -> None:
        """At the end of the backward pass: reduce the parameters outside the layers, make the compute stream wait
        for every all-reduce, and point each layer parameter's `.grad` at its reduced gradient."""
        self.in_backward = False
        incomplete = sum(bucket.waiting > 0 for bucket in self.buckets)
        for bucket in self.buckets:
            bucket.waiting = bucket.layers
        if incomplete:
            raise RuntimeError(f"FusedDataParallel: {incomplete} of {len(self.buckets)} gradient buckets were left "
                               "incomplete; every layer must take part in each backward pass")
        if self.other_parameters:
            grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.other_parameters]
            flat = _flatten_dense_tensors(grads)
            dist.all_reduce(flat, op=self.reduce_op)
            for parameter, reduced in zip(self.other_parameters, _unflatten_dense_tensors(flat, grads)):
                parameter.grad = reduced
        for work in self.pending:
            work.wait()
        self.pending.clear()
        if not self.backend_averages:
            self.buffer.div_(self.world_size)
            for parameter in self.other_parameters:
                parameter.grad.div_(self.world_size)
        for layer, slot in self.slots.items():
            layer.weight.grad = slot.weight
            if slot.bias is not None:
                layer.bias.grad = slot.bias


def bucket_groups(sizes: list[int], bucket_elements: int) -> list[list[int]]:
    """Consecutive indices of `sizes` grouped until each group holds at least `bucket_elements` (the last may hold
    fewer): [[0, 1], [2], ...]."""
    groups: list[list[int]] = [[]]
    held = 0
    for index, size in enumerate(sizes):
        groups[-1].append(index)
        held += size
        if held >= bucket_elements and index < len(sizes) - 1:
            groups.append([])
            held = 0
    return groups
