"""The collective timeout in each container environment: the oldest container's torch (2.2) has a smaller rendezvous
store API than the newest, and the roll call that names the absent rank must work with both."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sagemaker_distributed"))  # the timeout tests' runner

from stuck_rank_job import TIMEOUT_SECONDS, run_under_torchrun  # noqa: E402

pytestmark = pytest.mark.slow


def test_a_rank_that_never_reaches_a_collective_is_named_after_the_timeout(profile_env, tmp_path):
    # Given the container's Python and two torchrun ranks, the second never reaching the all-reduce
    profile, env = profile_env
    # When the job runs
    run = run_under_torchrun(str(env.python), "one_rank_never_arrives.py", tmp_path)
    # Then rank 0 gives up after the timeout and its failure file names itself and the absent rank
    assert run.returncode != 0, run.output
    assert TIMEOUT_SECONDS <= run.waited_seconds(), run.output
    assert run.failure_reason.startswith(
        f"CollectiveTimeout: rank 0 on algo-1 waited {TIMEOUT_SECONDS} s (SAGEMAKER_DISTRIBUTED_COLLECTIVE_TIMEOUT) in "
        "a collective; rank 1 on algo-1 never reached it."), (profile.name, run.failure_reason)
