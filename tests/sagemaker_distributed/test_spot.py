"""SIGTERM, SageMaker's notice before a spot interruption, becomes a flag the loop reads at a step of its choosing."""

from __future__ import annotations

import os
import signal

from sagemaker_distributed import StopSignal


def test_sigterm_is_noted_instead_of_ending_the_process():
    previous = signal.getsignal(signal.SIGTERM)
    try:
        stop = StopSignal()
        assert not stop.received and not stop.any_rank()
        # When SageMaker sends SIGTERM / Then the process lives on and the loop sees the note
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.received and stop.any_rank()
    finally:
        signal.signal(signal.SIGTERM, previous)
