"""SIGTERM, SageMaker's notice before a spot interruption or a StopTrainingJob, turned into a flag the training loop
acts on at its next checkpoint opportunity instead of dying mid-step."""

from __future__ import annotations

import signal

import torch
import torch.distributed as dist

from sagemaker_distributed.process_group import has_peers


class StopSignal:
    """Remembers a SIGTERM. `any_rank` is where the ranks agree to stop: one rank's notice stops them all at the same
    step, so none is left waiting in a collective the others never reach."""

    def __init__(self) -> None:
        self.received = False
        self.install()

    def install(self) -> None:
        """(Re)claims SIGTERM, e.g. after a framework put its own handler in front."""
        signal.signal(signal.SIGTERM, self._handle)

    def _handle(self, signum: int, frame: object) -> None:
        self.received = True

    @staticmethod
    def alone() -> bool:
        """Whether no other rank takes part: nobody to agree with on a SIGTERM."""
        return not has_peers()

    def received_alone(self) -> bool:
        """Whether this process got SIGTERM and trains alone: it may act at any step, not only where ranks in a group
        all check (`any_rank`). Asks nothing of the process group until a signal came."""
        return self.received and self.alone()

    def any_rank(self, device: torch.device | str = "cpu") -> bool:
        """Collective: whether any rank received SIGTERM (one all-reduce; call it on every rank at the same step)."""
        if self.alone():
            return self.received
        notes = torch.tensor([float(self.received)], device=device)
        dist.all_reduce(notes, op=dist.ReduceOp.SUM)
        return notes.item() > 0
