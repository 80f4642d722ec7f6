"""The benchmark's per-step hooks (benchmarks/harness/timing.py, a profiler) inside a Lightning Trainer."""

from __future__ import annotations

from collections.abc import Callable

import lightning as L

from benchmarks.harness.timing import StepWindows


class OnEveryStep(L.Callback):
    """Calls `on_step` after every optimizer step: a window timer's `step_done`, a profiler's `step`."""

    def __init__(self, on_step: Callable[[], None]) -> None:
        self.on_step = on_step

    def on_train_batch_end(self, trainer: L.Trainer, *args) -> None:
        self.on_step()


class WindowTimer(OnEveryStep):
    """Counts every optimizer step into `windows` and stops the Trainer once the last window is timed."""

    def __init__(self, windows: StepWindows) -> None:
        super().__init__(windows.step_done)
        self.windows = windows

    def on_train_batch_end(self, trainer: L.Trainer, *args) -> None:
        super().on_train_batch_end(trainer, *args)
        if self.windows.finished:
            trainer.should_stop = True
