"""Where a job's fixed cost goes: rank 0 logs `timeline: <phase> at <seconds>s`, the seconds since this process
started (not since the entry point's first line: the interpreter's own start and the imports count too), at each
milestone from launch to the model on disk. benchmarks.cpu.data_pipeline reads these lines into its phase table.

This module imports nothing beyond the standard library, so marking a phase costs nothing a job would not load.
"""

from __future__ import annotations

import os
import re
import time

# The milestones, in the order a run reaches them (a resumed or streaming run may skip some).
PHASES = ("imported", "parsed", "encoding fitted", "first step", "trained", "evaluated", "model written",
          "exported")
_LINE = re.compile(r"^timeline: (?P<phase>[a-z ]+) at (?P<seconds>[0-9.]+)s$", re.MULTILINE)


def _process_start() -> float:
    """This process's start on the `time.monotonic` clock: from /proc where there is one (Linux: the start in clock
    ticks since boot, against the boot-time clock), else when this module was first imported."""
    try:
        with open(f"/proc/{os.getpid()}/stat") as stat:
            # Field 22, counted after the command name's closing parenthesis (the name may hold spaces).
            started_ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
        since_start = time.clock_gettime(time.CLOCK_BOOTTIME) - started_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        since_start = 0.0
    return time.monotonic() - since_start


_STARTED = _process_start()


def seconds_since_start() -> float:
    return time.monotonic() - _STARTED


def mark(phase: str, enabled: bool = True) -> None:
    """Logs that this process reached `phase` (one of PHASES); `enabled` False (ranks other than 0) logs nothing."""
    if phase not in PHASES:
        raise ValueError(f"phase: {phase!r} is not one of {PHASES}; add it to PHASES in {__name__}")
    if enabled:
        print(f"timeline: {phase} at {seconds_since_start():.2f}s", flush=True)


def read(log: str) -> dict[str, float]:
    """The phases a job's log marked, with their seconds since its start (the last mark of a phase wins)."""
    return {match["phase"]: float(match["seconds"]) for match in _LINE.finditer(log)}
