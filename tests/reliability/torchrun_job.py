"""A `torchrun` job of the native entry script as a real process tree, with its ranks found by PID so a test can
kill or stop one of them the way a failing host or a spot interruption does."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "training"))  # the training tests' launch helpers

from training_launch import TRAINING_CODE, RunDirs, free_port, script_env  # noqa: E402


def torchrun_command(script: str, nproc: int, max_restarts: int) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", str(nproc),
            "--max-restarts", str(max_restarts), "--master-addr", "127.0.0.1", "--master-port", str(free_port()),
            str(TRAINING_CODE / script)]


def start_torchrun(script: str, args: list[str], *, nproc: int = 2, max_restarts: int = 1) -> subprocess.Popen:
    return subprocess.Popen(torchrun_command(script, nproc, max_restarts) + args, env=script_env(),
                            cwd=TRAINING_CODE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def run_torchrun(script: str, args: list[str], *, nproc: int = 2, timeout: float = 120) -> str:
    """Runs to the end; returns the combined output, failing with it when the job does not exit 0."""
    process = start_torchrun(script, args, nproc=nproc)
    output, _ = process.communicate(timeout=timeout)
    assert process.returncode == 0, f"torchrun {script} failed:\n{output[-4000:]}"
    return output


def wait_until(condition: Callable[[], bool], process: subprocess.Popen, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert process.poll() is None, f"the job ended before {what}:\n{process.stdout.read()[-4000:]}"
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        time.sleep(0.005)


# What each entry script names its checkpoints: ranker.training.checkpoint's files, Lightning's ModelCheckpoint.
CHECKPOINT_PATTERNS = {"train_ddp.py": "step-*.pt", "train_lightning.py": "*.ckpt"}


def wait_for_first_checkpoint(process: subprocess.Popen, dirs: RunDirs, script: str = "train_ddp.py") -> None:
    pattern = CHECKPOINT_PATTERNS[script]
    wait_until(lambda: any(dirs.checkpoint_dir.glob(pattern)), process, "a first checkpoint")


def rank_pids(launcher_pid: int) -> dict[int, int]:
    """{RANK: pid} of the workers torchrun started (its children), read from each one's /proc environment."""
    ranks = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            environment = (entry / "environ").read_bytes().split(b"\0") if parent == launcher_pid else []
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue  # a process that ended while we looked
        for variable in environment:
            if variable.startswith(b"RANK="):
                ranks[int(variable[5:])] = int(entry.name)
    return ranks


def wait_for_ranks(process: subprocess.Popen, world_size: int) -> dict[int, int]:
    found: dict[int, int] = {}

    def all_found() -> bool:
        found.update(rank_pids(process.pid))
        return len(found) == world_size

    wait_until(all_found, process, f"{world_size} ranks")
    return found
