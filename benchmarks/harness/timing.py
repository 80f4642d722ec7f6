"""One timing protocol for every trainer the GPU benchmark compares.

Warm-up steps are excluded; the timed part is split into windows, each bracketed by a device
synchronisation, and the median window rate is reported (robust to one slow window, e.g. a GC pause).
Every trainer (the project's two and the naive baselines) times itself through `StepWindows`, so the
figures are comparable by construction.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from benchmarks.harness.models import benchmark_model, training_flops_per_sample


@dataclass
class StepWindows:
    """Times `windows` windows of `steps_per_window` optimizer steps after `warmup_steps`."""

    warmup_steps: int
    steps_per_window: int
    windows: int
    device: torch.device
    _step: int = 0
    _window_start: float | None = None
    window_seconds: list[float] = field(default_factory=list)

    @property
    def total_steps(self) -> int:
        return self.warmup_steps + self.steps_per_window * self.windows

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)  # window edge: the only host sync in the timed region

    def step_done(self) -> None:
        """Call after every optimizer step (the step's work may still be queued on the device)."""
        self._step += 1
        timed = self._step - self.warmup_steps
        if timed == 0:
            self._sync()
            self._window_start = time.perf_counter()
            if self.device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(self.device)
        elif timed > 0 and timed % self.steps_per_window == 0:
            self._sync()
            now = time.perf_counter()
            self.window_seconds.append(now - self._window_start)
            self._window_start = now

    @property
    def finished(self) -> bool:
        return len(self.window_seconds) >= self.windows


@dataclass
class BenchmarkResult:
    trainer: str
    model: str
    """A benchmarks.harness.models name."""
    width: int
    world_size: int
    nodes: int
    batch_per_rank: int
    samples_per_second: float  # global, all ranks together: median over windows
    window_samples_per_second: list[float]
    peak_memory_gib: float
    flops_per_sample: int
    path: str = ""
    """The line ranker.gpu.fast_paths wrote for the run (empty for the naive baselines, which are not the project's)."""


def summarise(trainer: str, model: str, width: int, input_features: int, batch_per_rank: int,
              windows: StepWindows, path: str = "") -> BenchmarkResult:
    """The windows' rates of `trainer` training the benchmark model `model` (benchmarks.harness.models) `width` units
    wide."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    nodes = int(os.environ.get("GROUP_WORLD_SIZE", os.environ.get("BENCH_NODES", "1")))
    rates = [batch_per_rank * world_size * windows.steps_per_window / s for s in windows.window_seconds]
    peak = torch.cuda.max_memory_allocated(windows.device) / 2**30 if windows.device.type == "cuda" else 0.0
    return BenchmarkResult(
        trainer=trainer,
        model=model,
        width=width,
        world_size=world_size,
        nodes=nodes,
        batch_per_rank=batch_per_rank,
        samples_per_second=statistics.median(rates),
        window_samples_per_second=rates,
        peak_memory_gib=peak,
        flops_per_sample=training_flops_per_sample(benchmark_model(model, width), input_features),
        path=path,
    )


def append_result(path: Path, result: BenchmarkResult) -> None:
    """Rank 0 appends one JSON line per measured configuration."""
    with path.open("a") as handle:
        handle.write(json.dumps(asdict(result)) + "\n")
