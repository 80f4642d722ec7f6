"""The whole training step (forward, loss, backward, the gradient all-reduce, optimizer) captured once as a CUDA graph
and replayed for every later batch.

Why: at width 1024 the eager step is bound by launching ~150 small kernels from Python (docs/benchmarks.md); a replay
is one launch, so the GPU runs back to back and the loop's own Python (Lightning's included) hides under it.

What capture needs, and where it comes from:
- fixed shapes: every batch of a run has the same `[queries, max_docs, features]` (the data is padded per run), and
  each is copied into the graph's static input buffers;
- no host synchronisation inside the step (the engine's has none) and autocast without its weight cache;
- an optimizer that can be captured: fused AdamW with `capturable=True` and the learning rate as a device tensor,
  which the scheduler then rewrites in place (`CapturedStep` switches the optimizer over when it is built);
- warm-up before capture: a few eager steps (cuBLAS workspaces, the allocator; DDP builds its buckets and needs 11
  eager iterations before its all-reduce can be captured);
- a stream other than the legacy default one, current from before the model is wrapped in DDP to the end: DDP keeps
  each parameter's gradient accumulator, which remembers the stream it was made on, and capture fails if that is the
  default stream (`use_capture_stream`, called where the run starts).
The warm-up steps train on real batches, so a captured run sees exactly the batches an eager run sees.

`CapturedLoss` is the same idea for a loop that runs the backward pass and the optimizer itself (Lightning's
automatic optimization): the forward pass with the loss, and its backward, captured by PyTorch's own
`torch.cuda.make_graphed_callables`; the loop's `loss.backward()` replays the backward graph, and its optimizer step
stays eager (fused AdamW: a few launches).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import torch
from torch import nn

from ranker.data.batches import Batch

EAGER_STEPS_BEFORE_CAPTURE = 3
EAGER_STEPS_BEFORE_CAPTURE_DDP = 11


def use_capture_stream(device: torch.device) -> None:
    """Makes a fresh non-default stream current on `device` for the rest of the process (see the module docstring)."""
    torch.cuda.set_stream(torch.cuda.Stream(device))


class CapturedStep:
    """Runs `update` (forward, backward and optimizer update of one batch, engine.forward_backward_update, and any
    device-side bookkeeping such as the meter's sums) eagerly for the warm-up, then as a graph; the caller steps the
    scheduler."""

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer, device: torch.device,
                 update: Callable[[Batch], None]):
        if torch.cuda.current_stream(device) == torch.cuda.default_stream(device):
            raise RuntimeError("CapturedStep: the default stream is current; call use_capture_stream(device) before "
                               "the model is wrapped in DDP")
        self.optimizer, self.device, self.update = optimizer, device, update
        for group in optimizer.param_groups:  # a float learning rate would be frozen into the graph
            group["lr"] = torch.as_tensor(group["lr"], dtype=torch.float32, device=device)
            group["capturable"] = True
        distributed = isinstance(model, nn.parallel.DistributedDataParallel)
        self.eager_steps_left = EAGER_STEPS_BEFORE_CAPTURE_DDP if distributed else EAGER_STEPS_BEFORE_CAPTURE
        self.graph: torch.cuda.CUDAGraph | None = None
        self.static_batch: Batch | None = None

    def __call__(self, batch: Batch) -> None:
        if self.graph is not None:
            for static, new in zip(self.static_batch, batch):
                static.copy_(new, non_blocking=True)
            self.graph.replay()
            return
        self.optimizer.zero_grad(set_to_none=True)
        if self.eager_steps_left > 0:
            self.eager_steps_left -= 1
            self.update(batch)
            return
        self._capture(batch)

    def _capture(self, batch: Batch) -> None:
        """Records the step on this batch (recording runs nothing), then replays it once to train on the batch."""
        self.static_batch = tuple(tensor.clone() for tensor in batch)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, stream=torch.cuda.current_stream(self.device)):
            self.update(self.static_batch)
        self.graph.replay()


class _TrainingLoss(nn.Module):
    """The batch's loss as one module, so that the graph holds the loss's kernels too and the model's parameters are
    the graph's (make_graphed_callables takes a module's parameters as inputs)."""

    def __init__(self, model: nn.Module, loss_function: Callable[[torch.Tensor, torch.Tensor, torch.Tensor],
                                                                  torch.Tensor]):
        super().__init__()
        self.model, self.loss_function = model, loss_function

    def forward(self, features: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.loss_function(self.model(features), labels, mask)


class CapturedLoss:
    """The training loss of a batch, with a backward pass, from CUDA graphs captured on the first batch and replayed for
    every later batch of its shapes (a batch of other shapes runs eagerly). `autocast` makes the context the graphs
    are captured in: autocast without its weight cache, which capture refuses. The optimizer is the caller's.

    A plain object, not a module: held by a module, it would add the loss module's keys to that module's state dict."""

    def __init__(self, model: nn.Module, loss_function: Callable[[torch.Tensor, torch.Tensor, torch.Tensor],
                                                                 torch.Tensor],
                 device: torch.device, autocast: Callable[[], contextlib.AbstractContextManager]):
        self.loss = _TrainingLoss(model, loss_function)
        self.device, self.autocast = device, autocast
        self.shapes: tuple[torch.Size, ...] | None = None

    def __call__(self, batch: Batch) -> torch.Tensor:
        if self.shapes is None:
            self._capture(batch)
        if tuple(tensor.shape for tensor in batch) != self.shapes:
            features, labels, mask = batch
            return self.loss.loss_function(self.loss.model(features), labels, mask)
        # In training mode the graphed module replays; make_graphed_callables runs the eager forward in eval mode.
        return self.loss(*batch)

    def _capture(self, batch: Batch) -> None:
        # The warm-up and the capture draw dropout masks: the random state is put back, so that the first replay
        # draws the masks an eager first step would (a replay advances the generator as the eager step does).
        random_state = torch.cuda.get_rng_state(self.device)
        # The parameters' gradient-accumulation nodes belong to the stream they were made on, which is not the one
        # make_graphed_callables captures on, nor the one the training runs on: each backward then orders one stream
        # after the other (a device-side event, no host wait), which newer torch warns about. Here it is how
        # make_graphed_callables works, so not worth a warning.
        quiet = getattr(torch.autograd.graph, "set_warn_on_accumulate_grad_stream_mismatch", None)
        if quiet is not None:
            quiet(False)
        with self.autocast():
            torch.cuda.make_graphed_callables(self.loss, tuple(batch), allow_unused_input=True)
        torch.cuda.set_rng_state(random_state, self.device)
        self.shapes = tuple(tensor.shape for tensor in batch)
