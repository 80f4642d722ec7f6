"""How the training tests run the entry scripts: as real processes, the way SageMaker launches them.

Multi-process runs go through `subprocess` (torchrun, or ranks started with the variables mpirun sets), never
Lightning's own launcher inside pytest, which would re-run pytest in each child.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from safetensors.torch import load_file

TRAINING_CODE = Path(__file__).resolve().parents[2] / "training_code"

# model.pt2, torch.export's trace of the scorer, costs seconds of CPU at the end of every run: the runs that never read
# it leave it out. The session's two_rank_runs write it (test_training_runs.py checks every artifact), and so does
# the serving tests' job (test_portable_export.py scores with it).
NO_PORTABLE_EXPORT = ["--portable-export", "false"]
# Small enough that a 2-rank run takes seconds on 2 CPU cores; no dropout so ranks need not share RNG streams.
TINY_MODEL_FLAGS = ["--width", "16", "--num-layers", "3", "--dropout", "0", "--log-every", "4", *NO_PORTABLE_EXPORT]
# 64 queries, 2 ranks x 4 queries, 3 epochs. The pointwise loss, because the listwise loss is blind to per-query score
# shifts: parameters that only shift scores get rounding-noise gradients, which Adam amplifies to step-sized
# differences between any two reduction orders (1 rank vs 2), however correct both are.
TWO_RANKS = ["--batch-size", "4", "--epochs", "3", "--loss", "pointwise", *TINY_MODEL_FLAGS]


@dataclass(frozen=True)
class RunDirs:
    model_dir: Path
    output_dir: Path
    checkpoint_dir: Path

    def flags(self) -> list[str]:
        return ["--model-dir", str(self.model_dir), "--output-data-dir", str(self.output_dir),
                "--checkpoint-dir", str(self.checkpoint_dir)]

    def weights(self) -> dict:
        return load_file(self.model_dir / "model.safetensors")


def run_dirs(root: Path) -> RunDirs:
    return RunDirs(root / "model", root / "output", root / "checkpoints")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def script_env(**extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("SM_", "OMPI_", "RANK", "WORLD"))}
    env.update({"OMP_NUM_THREADS": "1", "PYTHONPATH": str(TRAINING_CODE), "PYTHONDONTWRITEBYTECODE": "1"}, **extra)
    return env


def command(script: str, nproc: int) -> list[str]:
    if nproc == 1:
        return [sys.executable, str(TRAINING_CODE / script)]
    return [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", str(nproc),
            "--master-addr", "127.0.0.1", "--master-port", str(free_port()), str(TRAINING_CODE / script)]


def run_script(script: str, args: list[str], nproc: int = 1, timeout: int = 180) -> subprocess.CompletedProcess:
    result = subprocess.run(command(script, nproc) + args, env=script_env(), capture_output=True, text=True,
                            timeout=timeout, cwd=TRAINING_CODE)
    assert result.returncode == 0, f"{script} x{nproc} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def start_mpirun_ranks(command: list[str], nproc: int = 2) -> list[subprocess.Popen]:
    """`command` as `nproc` plain processes on this host carrying what mpirun and SageMaker's toolkit set
    (`OMPI_COMM_WORLD_*`, one host; no torchrun variables), rank 0 serving the rendezvous: a job's ranks without a
    launcher process. Each one's stdout and stderr come together."""
    port = str(free_port())
    return [subprocess.Popen(
        command, cwd=TRAINING_CODE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=script_env(OMPI_COMM_WORLD_RANK=str(rank), OMPI_COMM_WORLD_SIZE=str(nproc),
                       OMPI_COMM_WORLD_LOCAL_RANK=str(rank), OMPI_COMM_WORLD_LOCAL_SIZE=str(nproc),
                       SM_HOSTS='["algo-1"]', SM_CURRENT_HOST="algo-1", MASTER_ADDR="127.0.0.1", MASTER_PORT=port))
        for rank in range(nproc)]


def run_hosts(script: str, host_args: list[list[str]], nproc_per_host: int = 1, timeout: int = 300,
              **env: str) -> list[subprocess.CompletedProcess]:
    """One torchrun per host, as SageMaker's toolkit starts them (`--nnodes N --node-rank i`), all on this machine:
    host `i` runs `script` with `host_args[i]` and a host-local cache folder of its own."""
    port = str(free_port())
    processes = [subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(len(host_args)), "--nproc-per-node",
         str(nproc_per_host), "--node-rank", str(node_rank), "--master-addr", "127.0.0.1", "--master-port", port,
         str(TRAINING_CODE / script), *args],
        env=script_env(**env, RANKER_CACHE_DIR=str(Path(args[args.index("--output-data-dir") + 1]) / "cache")),
        cwd=TRAINING_CODE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for node_rank, args in enumerate(host_args)]
    results = []
    for process in processes:
        stdout, stderr = process.communicate(timeout=timeout)
        results.append(subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr))
    assert all(result.returncode == 0 for result in results), "\n".join(
        f"host {index}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}" for index, result in enumerate(results))
    return results
