"""Data parallelism for the model's fused dense layers: each layer's gradients are written by their GEMM straight into
the all-reduce buffer, and reduced as soon as they are all there. It takes DDP's place on GPU for the bf16 fused path
(ranker.gpu.fast_paths decides where); DDP stays for everything else.

What it saves over DDP (measured in docs/benchmarks.md, optimisation log):
- DDP hears that a gradient is ready only once autograd has accumulated it, after the layer's whole backward, input
  gradient included. Here a layer's backward computes its weight and bias gradients first and starts their
  all-reduce before the input gradient's GEMM, so the first layer's (the last to start) is not left exposed at the end.
- DDP then copies each gradient into its bucket, dividing by the world size on the way: a pass over all gradients.
  Here the gradient GEMM writes into the buffer itself and NCCL averages inside its kernel (`ReduceOp.AVG`).
Layers are grouped into buckets of at least BUCKET_BYTES in backward order, as DDP does: one all-reduce per 67 MB
layer at width 4096, a few instead of seven at width 1024, where each all-reduce's fixed cost shows.

With `shard_optimizer` (the default where there are several buckets) each bucket is reduce-scattered instead, and
ranker.gpu.sharded_optimizer's AdamW updates this rank's shard and all-gathers it beside the rest of the backward pass.

Parameters outside the dense layers (LayerNorm's) take the ordinary autograd path and are reduced together once the
backward pass ends (they are small). Gradients are written, not accumulated: one backward pass per optimizer step.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import torch
import torch.distributed as dist
from torch import nn
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors
from torch.autograd import Variable

from ranker.gpu.fused_linear import fused_plan, fused_scores

# In place (the output is this rank's part of the input); renamed from the `_tensor` spellings in newer torch.
REDUCE_SCATTER = getattr(dist, "reduce_scatter_single", dist.reduce_scatter_tensor)
ALL_GATHER = getattr(dist, "all_gather_single", dist.all_gather_into_tensor)
BUCKET_BYTES = 25 * 2**20  # DDP's default bucket_cap_mb; smaller buckets were slower (docs/benchmarks.md)


class Bucket:
    """Consecutive layers (in backward order) whose gradients share one reduction over their part of the buffer,
    padded to a multiple of the world size so that each rank's shard of it is equal."""

    def __init__(self, start: int, gradients: torch.Tensor, parameters: torch.Tensor | None, layers: int, rank: int,
                 world_size: int):
        self.gradients, self.parameters, self.layers, self.waiting = gradients, parameters, layers, layers
        self.start = start
        """Where the bucket begins in the flat layout."""
        self.shard_start = start + rank * gradients.numel() // world_size
        """Where this rank's shard of it begins in the flat layout."""
        self.gradient_shard = gradients.chunk(world_size)[rank]
        self.parameter_shard = parameters.chunk(world_size)[rank] if parameters is not None else None
        self.work: dist.Work | None = None


class LayerGradients:
    """One dense layer's gradients: float32 views of the shared buffer that its backward writes into, and the call
    that tells its bucket they are written (ranker.gpu.fused_linear's GradientSlot)."""

    def __init__(self, owner: FusedDataParallel, layer: nn.Linear, flat: torch.Tensor, bucket: Bucket):
        self.owner, self.bucket = owner, bucket
        weights = layer.weight.numel()
        self.weight = flat[:weights].view_as(layer.weight)
        self.bias = flat[weights:].view_as(layer.bias) if layer.bias is not None else None

    def written(self) -> None:
        self.owner.written(self)


class FusedDataParallel(nn.Module):
    """Wraps a RankingMLP like DDP does (`.module`, rank 0's weights broadcast at construction, averaged gradients
    in `.grad` after backward), with the layers' gradients reduced as described in the module docstring. Runs the
    model through the fused layers (ranker.gpu.fused_linear), whatever the device: on GPU that is the bf16 path the
    wrapper is chosen for (ranker.gpu.fast_paths); the CPU runs its tests.

    `shard_optimizer` (where the layers make more than one bucket): each bucket is reduce-scattered instead of
    all-reduced, so a rank holds the averaged gradient of its 1/world_size shard only and the layers' parameters get
    no `.grad`. The optimizer must then be the ranker.gpu.sharded_optimizer.ShardedAdamW built from this wrapper
    (engine.build_optimizer does that): each bucket's shard is updated, and all-gathered, on a stream of its own
    during the rest of the backward pass. For that the layers' parameters are moved into one flat buffer laid out like
    the gradients'."""

    def __init__(self, module: nn.Module, bucket_bytes: int = BUCKET_BYTES, shard_optimizer: bool = False):
        super().__init__()
        if not dist.is_initialized():
            raise RuntimeError("FusedDataParallel: initialise the process group first")
        self.module = module
        self.plan = fused_plan(module.layers)
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        # NCCL averages in its kernel; gloo (the CPU tests) sums, and the sum is divided once reduced.
        self.backend_averages = dist.get_backend() == "nccl"
        self.reduce_op = dist.ReduceOp.AVG if self.backend_averages else dist.ReduceOp.SUM
        parameters = list(module.parameters())
        if not all(parameter.requires_grad and parameter.dtype == torch.float32 for parameter in parameters):
            raise ValueError("FusedDataParallel: every parameter must be a trainable float32 tensor")
        backward_order = [layer for layer in module.modules() if isinstance(layer, nn.Linear)][::-1]
        in_layers = {id(parameter) for layer in backward_order for parameter in layer.parameters()}
        self.other_parameters = [parameter for parameter in parameters if id(parameter) not in in_layers]
        sizes = [sum(parameter.numel() for parameter in layer.parameters()) for layer in backward_order]
        groups = bucket_groups(sizes, bucket_bytes // torch.float32.itemsize)
        # With one bucket no backward is left to hide the sharded update under, and its two collectives cost more
        # than one all-reduce (slower at width 1024 on 2 GPUs, docs/benchmarks.md): the update stays whole.
        self.shard_optimizer = shard_optimizer and len(groups) > 1
        padded = [padded_length(sum(sizes[i] for i in group), self.world_size) for group in groups]
        device = parameters[0].device
        self.gradient_buffer = torch.zeros(sum(padded), dtype=torch.float32, device=device)
        self.parameter_buffer = torch.zeros_like(self.gradient_buffer) if self.shard_optimizer else None
        self.layer_offsets: dict[nn.Parameter, int] = {}
        """Each layer parameter's offset in the flat layout (gradients and, when sharded, parameters)."""
        self.slots: dict[nn.Module, LayerGradients] = {}
        self.buckets: list[Bucket] = []
        start = 0
        for group, length in zip(groups, padded):
            bucket = Bucket(start, self.gradient_buffer[start:start + length], self._flat_parameters(start, length),
                            len(group), self.rank, self.world_size)
            self.buckets.append(bucket)
            offset = start
            for index in group:
                layer = backward_order[index]
                self.slots[layer] = LayerGradients(self, layer, self.gradient_buffer[offset:offset + sizes[index]],
                                                   bucket)
                for parameter in layer.parameters():
                    self.layer_offsets[parameter] = offset
                    offset += parameter.numel()
            start += length
        self.bucket_update: Callable[[Bucket], None] | None = None
        """Set by ShardedAdamW: updates this rank's shard of a bucket's parameters from its reduced gradients."""
        self.update_stream = torch.cuda.Stream(device) if self.shard_optimizer and device.type == "cuda" else None
        if self.shard_optimizer:  # the layers' parameters become views of the flat buffer, values kept
            for parameter, offset in self.layer_offsets.items():
                view = self.parameter_buffer[offset:offset + parameter.numel()].view_as(parameter)
                parameter.data = view.copy_(parameter.data)
        self.pending: list[dist.Work] = []
        self.in_backward = False
        for tensor in module.state_dict().values():  # every rank starts from rank 0's weights, as under DDP
            dist.broadcast(tensor, src=0)

    def _flat_parameters(self, start: int, length: int) -> torch.Tensor | None:
        return self.parameter_buffer[start:start + length] if self.parameter_buffer is not None else None

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return fused_scores(self.plan, self.module.inputs(features),
                            self.slots if torch.is_grad_enabled() else None)

    def written(self, slot: LayerGradients) -> None:
        """Called from a layer's backward once its gradients are in the buffer: once its bucket is complete, start the
        bucket's reduction (NCCL runs it on its own stream, after what the compute stream has queued so far) and let
        the compute go on."""
        if not self.in_backward:
            if self.shard_optimizer and self.bucket_update is None:
                raise RuntimeError("FusedDataParallel(shard_optimizer=True): build its optimizer as "
                                   "ShardedAdamW(wrapper, adamw) (engine.build_optimizer does); a plain optimizer "
                                   "would never see the dense layers' gradients")
            self.in_backward = True
            Variable._execution_engine.queue_callback(self._finish_backward)
        bucket = slot.bucket
        bucket.waiting -= 1
        if bucket.waiting == 0:
            if self.shard_optimizer:  # in place: this rank's shard of the bucket receives its average
                bucket.work = REDUCE_SCATTER(bucket.gradient_shard, bucket.gradients, op=self.reduce_op,
                                             async_op=True)
                self._update_beside_backward(bucket)  # `bucket_update` is set: checked as the backward pass began
            else:
                self.pending.append(dist.all_reduce(bucket.gradients, op=self.reduce_op, async_op=True))

    def _finish_backward(self) -> None:
        """At the end of the backward pass: reduce the parameters outside the layers and, unless sharded (each
        bucket's update has waited for its own shard then), make the compute stream wait for every all-reduce and
        point each layer parameter's `.grad` at its reduced gradient."""
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
            if not self.backend_averages:
                flat.div_(self.world_size)
            for parameter, reduced in zip(self.other_parameters, _unflatten_dense_tensors(flat, grads)):
                parameter.grad = reduced
        if self.shard_optimizer:
            return
        for work in self.pending:
            work.wait()
        self.pending.clear()
        if not self.backend_averages:
            self.gradient_buffer.div_(self.world_size)
        for layer, slot in self.slots.items():
            layer.weight.grad = slot.weight
            if slot.bias is not None:
                layer.bias.grad = slot.bias

    def _update_beside_backward(self, bucket: Bucket) -> None:
        """On the update stream, while the backward pass goes on: wait for this rank's averaged gradient shard,
        update that shard of the parameters (`bucket_update`) and start the all-gather that sends it to every rank.
        The backward pass never reads the float32 parameters (each layer saved its bf16 copy in the forward pass)."""
        with self._on_update_stream():
            bucket.work.wait()
            bucket.work = None
            if not self.backend_averages:
                bucket.gradient_shard.div_(self.world_size)
            with torch.no_grad():
                self.bucket_update(bucket)
            self.pending.append(ALL_GATHER(bucket.parameters, bucket.parameter_shard, async_op=True))

    @contextlib.contextmanager
    def _on_update_stream(self) -> Iterator[None]:
        if self.update_stream is None:  # CPU: one stream
            yield
            return
        self.update_stream.wait_stream(torch.cuda.current_stream())  # forks from (and, captured, joins) the step
        with torch.cuda.stream(self.update_stream):
            yield

    def wait_for_update(self) -> None:
        """Makes the compute stream wait until every bucket's update is done and gathered on every rank (sharded)."""
        if self.update_stream is not None:
            torch.cuda.current_stream().wait_stream(self.update_stream)
        for work in self.pending:
            work.wait()
        self.pending.clear()


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


def padded_length(elements: int, world_size: int) -> int:
    """`elements` rounded up to a multiple of `world_size`."""
    return -(-elements // world_size) * world_size
