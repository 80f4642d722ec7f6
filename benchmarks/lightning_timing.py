"""The benchmark's timing protocol (benchmarks/timing.py) inside a Lightning Trainer."""

from __future__ import annotations

import lightning as L

from benchmarks.timing import StepWindows


class WindowTimer(L.Callback):
    """Counts every optimizer step into `windows` and stops the Trainer once the last window is timed."""

    def __init__(self, windows: StepWindows) -> None:
        self.windows = windows

    def on_train_batch_end(self, trainer: L.Trainer, *args) -> None:
        self.windows.step_done()
        if self.windows.finished:
            trainer.should_stop = True
