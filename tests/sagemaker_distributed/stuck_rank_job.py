"""Two gloo ranks under torchrun, the second of which never reaches the first collective, with a collective timeout
of a few seconds: how the collective-timeout tests (and the container-parity suite, in each container's Python) run
the fixture scripts in scripts/."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

SCRIPTS = Path(__file__).parent / "scripts"
TRAINING_CODE = Path(__file__).resolve().parents[2] / "training_code"
TIMEOUT_VARIABLE = "SAGEMAKER_DISTRIBUTED_COLLECTIVE_TIMEOUT"
TIMEOUT_SECONDS = 3
# Start-up (importing torch, joining the group), the timeout, the roll call's wait and the exit, on 2 busy cores.
RUN_LIMIT_SECONDS = 120


@dataclass(frozen=True)
class StuckRankRun:
    returncode: int
    output: str
    failure_reason: str | None
    ended_at: float

    def waited_seconds(self) -> float:
        """From rank 0 entering the all-reduce (the scripts print when) to the end of the job."""
        return self.ended_at - float(re.search(r"rank 0: entering the all-reduce at ([0-9.]+)", self.output)[1])


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def job_env(**extra: str) -> dict[str, str]:
    """This environment without another launcher's variables, the training code importable, a short timeout."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("SM_", "OMPI_", "RANK", "WORLD", "LOCAL_", "MASTER_", "TORCHELASTIC", "VIRTUAL_ENV"))}
    return {**env, "PYTHONPATH": str(TRAINING_CODE), "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1",
            TIMEOUT_VARIABLE: str(TIMEOUT_SECONDS), **extra}


def run_under_torchrun(python: str, script: str, output_dir: Path) -> StuckRankRun:
    """`script` as two torchrun ranks on one host (`algo-1`), its failure file in `output_dir`."""
    command = [python, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", "2",
               "--master-addr", "127.0.0.1", "--master-port", str(free_port()), str(SCRIPTS / script)]
    env = job_env(SM_OUTPUT_DIR=str(output_dir), SM_HOSTS='["algo-1"]', SM_CURRENT_HOST="algo-1")
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=RUN_LIMIT_SECONDS,
                            cwd=output_dir)
    failure = output_dir / "failure"
    return StuckRankRun(result.returncode, result.stdout + result.stderr,
                        failure.read_text() if failure.is_file() else None, time.time())
