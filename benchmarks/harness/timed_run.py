"""A process whose output lines are stamped with the seconds since its launch as they arrive: how the benchmarks that
launch an entry point (time to model, ranking quality, process exit) split its wall time into the phases its log
marks."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path


def run_timed(command: list[str], cwd: Path, env: dict[str, str], log: Path) -> list[tuple[float, str]]:
    """Runs `command`, stamping each output line with the seconds since launch as it arrives."""
    started = time.perf_counter()
    lines = []
    with subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          bufsize=1) as process, log.open("w", buffering=1) as record:  # a line on disk as it comes
        for line in process.stdout:
            lines.append((time.perf_counter() - started, line.rstrip("\n")))
            record.write(f"{lines[-1][0]:9.3f} {line}")
        returncode = process.wait()
    lines.append((time.perf_counter() - started, "<exit>"))
    if returncode:
        tail = "\n".join(text for _, text in lines[-40:])
        raise RuntimeError(f"{command} failed with exit code {returncode}; log {log}:\n{tail}")
    return lines
