"""A DDP script written from docs/bring-your-own.md runs as one process as it does as several: the one call joins a
process group of one rank, so `DistributedDataParallel` and `DistributedSampler` work unchanged when the job has one
host and one process (plain `python`, as SageMaker runs a job without a distribution, or torchrun's
`--nproc-per-node 1`)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from stuck_rank_job import SCRIPTS, job_env

LAUNCHERS = {
    "python": [sys.executable],
    "torchrun": [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "1"],
}


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_the_documented_ddp_recipe_trains_as_one_process(launcher, tmp_path):
    # Given a script that calls init_process_group() and wraps its model in DDP, as the docs say
    # When one process runs it
    result = subprocess.run([*LAUNCHERS[launcher], str(SCRIPTS / "documented_ddp_recipe.py")], env=job_env(),
                            capture_output=True, text=True, timeout=120, cwd=tmp_path)
    # Then it trained every batch on a group of one gloo rank and ended cleanly
    assert result.returncode == 0, result.stdout + result.stderr
    assert "rank 0 of 1 on gloo: 4 steps" in result.stdout
