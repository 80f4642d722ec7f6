"""Training loss and throughput, accumulated on the device and read back only when a line is due.

The read is also where ranks agree on stopping: a SIGTERM seen by any rank travels in the same all-reduce, so
every rank stops after the same step without an extra synchronisation.
"""

from __future__ import annotations

import time

import sagemaker_distributed as distributed
import torch


class TrainingMeter:
    """The sums are added inside the training step (engine.step_function), so that under CUDA graphs they are part of
    the replayed graph rather than three more kernels for the loop to launch each step."""

    def __init__(self, device: torch.device):
        self.device = device
        self.loss_sum = torch.zeros((), device=device)
        self.documents = torch.zeros((), device=device)
        self.reset()

    def reset(self) -> None:
        # In place: a captured step holds these two tensors and goes on adding into them.
        self.loss_sum.zero_()
        self.documents.zero_()
        self.steps = 0
        """Counted by the step function on the host (a replayed graph runs no Python)."""
        self.started = time.perf_counter()

    def add(self, loss: torch.Tensor, mask: torch.Tensor) -> None:
        """Device work only: one step's loss and documents (the step function calls it, inside a captured step)."""
        self.loss_sum += loss
        self.documents += mask.sum()

    def read(self, stop_requested: bool) -> tuple[dict[str, float], bool]:
        """Mean train loss over the window (all ranks), documents/s (all ranks), and whether any rank must stop."""
        totals = torch.stack([self.loss_sum, self.documents,
                              torch.tensor(float(stop_requested), device=self.device)])
        loss_sum, documents, stops = distributed.all_reduce_sum(totals).tolist()  # the host sync point
        world_size = torch.distributed.get_world_size() if torch.distributed.is_initialized() else 1
        elapsed = time.perf_counter() - self.started
        metrics = {"train_loss": loss_sum / max(1, self.steps * world_size),
                   "samples_per_second": documents / max(elapsed, 1e-9)}
        self.reset()
        return metrics, stops > 0
