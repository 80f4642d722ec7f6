"""Progress on rank 0: a tqdm bar on a terminal; in a log stream (CloudWatch) the metric lines alone.

Every report prints one `name=value` line through `log_format.format_metrics`, flushed, which is what SageMaker's
metric regexes read; the bar only decorates it when someone is watching.
"""

from __future__ import annotations

import sys

from tqdm import tqdm

from ranker.log_format import format_metrics


class Progress:
    def __init__(self, total_steps: int, enabled: bool, initial_step: int = 0):
        self.enabled = enabled
        self.last_step = initial_step
        self.bar = tqdm(total=total_steps, initial=initial_step, unit="step", file=sys.stderr) \
            if enabled and sys.stderr.isatty() else None

    def report(self, metrics: dict[str, float]) -> None:
        if not self.enabled:
            return
        line = format_metrics(metrics)
        if self.bar is not None:
            self.bar.update(int(metrics["step"]) - self.last_step)
            self.bar.write(line, file=sys.stdout)
        else:
            print(line, flush=True)
        self.last_step = int(metrics["step"])

    def note(self, text: str) -> None:
        if self.enabled:
            (self.bar.write if self.bar is not None else print)(text)
            sys.stdout.flush()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
