"""The collective timeout: a rank waiting in a collective that another rank never reaches gives up after the
configured time, and the failure file names the host and rank that gave up and the rank that never arrived.

The runs are real: two gloo ranks started by torchrun, or as two hosts the way mpirun starts ranks
(`OMPI_COMM_WORLD_*`, one rank per host, rank 0 serving the rendezvous store), with a timeout of a few seconds."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import warnings
from datetime import timedelta

import pytest
import torch.distributed as dist
from sagemaker_distributed import collective_timeout
from sagemaker_distributed.collective_timeout import (
    DEFAULT_TIMEOUT,
    TIMEOUT_VARIABLE,
    is_collective_timeout,
    nccl_enforces_timeout,
    warn_if_not_enforced,
)

from stuck_rank_job import RUN_LIMIT_SECONDS, SCRIPTS, TIMEOUT_SECONDS, free_port, job_env, run_under_torchrun

REASON_OF_RANK_0 = "CollectiveTimeout: rank 0 on algo-1 waited 3 s (SAGEMAKER_DISTRIBUTED_COLLECTIVE_TIMEOUT) in a collective; "


def test_the_timeout_defaults_to_thirty_minutes_and_reads_seconds_from_the_environment():
    assert collective_timeout.collective_timeout({}) == DEFAULT_TIMEOUT == timedelta(minutes=30)
    assert collective_timeout.collective_timeout({TIMEOUT_VARIABLE: "90"}) == timedelta(seconds=90)
    assert collective_timeout.collective_timeout({TIMEOUT_VARIABLE: " 2.5 "}) == timedelta(seconds=2.5)


@pytest.mark.parametrize("value", ["0", "-5", "ten", "inf", "nan"])
def test_a_timeout_that_is_no_positive_number_of_seconds_is_refused_naming_the_variable(value):
    with pytest.raises(ValueError, match=rf"{TIMEOUT_VARIABLE}='{value}' is not a positive number of seconds"):
        collective_timeout.collective_timeout({TIMEOUT_VARIABLE: value})


def test_nccl_enforces_the_timeout_unless_async_error_handling_is_turned_off_without_blocking_wait():
    # torch >= 2.2 defaults TORCH_NCCL_ASYNC_ERROR_HANDLING to 3 and torchrun sets 1: both end the process
    assert nccl_enforces_timeout({})
    assert nccl_enforces_timeout({"TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"})
    assert not nccl_enforces_timeout({"TORCH_NCCL_ASYNC_ERROR_HANDLING": "0"})
    assert not nccl_enforces_timeout({"NCCL_ASYNC_ERROR_HANDLING": "0"})  # the name torch still reads
    assert nccl_enforces_timeout({"TORCH_NCCL_ASYNC_ERROR_HANDLING": "0", "TORCH_NCCL_BLOCKING_WAIT": "1"})


def test_turning_nccl_enforcement_off_is_warned_about_and_gloo_is_not():
    with pytest.warns(RuntimeWarning, match="NCCL will not enforce the collective timeout"):
        warn_if_not_enforced("nccl", {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "0"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_if_not_enforced("gloo", {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "0"})
        warn_if_not_enforced("nccl", {})


def test_only_the_backends_timeout_errors_count_as_collective_timeouts():
    # The texts torch 2.2 and 2.13 raise with (gloo), and NCCL's where the process survives its watchdog
    assert is_collective_timeout(RuntimeError(
        "[../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 3000ms for recv operation "
        "to complete"))
    assert is_collective_timeout(dist.DistBackendError(
        "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4, OpType=ALLREDUCE) ran for "
        "1800021 milliseconds before timing out."))
    assert not is_collective_timeout(RuntimeError("Connection reset by peer"))
    assert not is_collective_timeout(TimeoutError("Timed out waiting 3000ms for recv operation to complete"))


def _stop(processes: list[subprocess.Popen]) -> None:
    for process in processes:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@pytest.mark.slow
def test_under_torchrun_the_waiting_rank_fails_after_the_timeout_naming_itself_and_the_absent_rank(tmp_path):
    # Given two ranks on one host (torchrun), the second of which never reaches the all-reduce
    # When the job runs
    run = run_under_torchrun(sys.executable, "one_rank_never_arrives.py", tmp_path)
    # Then it fails a few seconds after rank 0 entered the collective: the timeout, the roll call, the exit
    assert run.returncode != 0, run.output
    assert TIMEOUT_SECONDS <= run.waited_seconds() < TIMEOUT_SECONDS + 30, run.output
    # And the failure file names the rank that gave up, where, after how long, and the rank that never arrived
    assert run.failure_reason.startswith(f"{REASON_OF_RANK_0}rank 1 on algo-1 never reached it. RuntimeError: "), (
        run.failure_reason)
    assert "Timed out waiting 3000ms for recv operation" in run.failure_reason


@pytest.mark.slow
def test_on_two_hosts_the_failure_file_names_the_host_of_the_rank_that_never_arrived(tmp_path):
    # Given one rank on each of two hosts, started as mpirun starts them (rank 0 serves the rendezvous store), the
    # second never reaching the all-reduce
    port, hosts = free_port(), ["algo-1", "algo-2"]
    processes = []
    for rank, host in enumerate(hosts):
        env = job_env(OMPI_COMM_WORLD_RANK=str(rank), OMPI_COMM_WORLD_SIZE="2", OMPI_COMM_WORLD_LOCAL_RANK="0",
                      OMPI_COMM_WORLD_LOCAL_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                      SM_HOSTS=json.dumps(hosts), SM_CURRENT_HOST=host, SM_OUTPUT_DIR=str(tmp_path / host))
        processes.append(subprocess.Popen([sys.executable, str(SCRIPTS / "one_rank_never_arrives.py")], env=env,
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                          start_new_session=True))
    try:
        # When rank 0 gives up
        output, _ = processes[0].communicate(timeout=RUN_LIMIT_SECONDS)
    finally:
        _stop(processes)
    # Then it exits non-zero, with the reason in its host's failure file naming the other host's rank
    assert processes[0].returncode == 1, output
    reason = (tmp_path / "algo-1" / "failure").read_text()
    assert reason.startswith(f"{REASON_OF_RANK_0}rank 1 on algo-2 never reached it."), reason
    assert not (tmp_path / "algo-2" / "failure").exists()  # the stuck rank wrote nothing: it never raised


@pytest.mark.slow
def test_a_lightning_script_on_the_strategy_fails_after_the_timeout_naming_the_absent_rank(tmp_path):
    # Given Lightning's BoringModel on the package's strategy, two torchrun ranks, the second stuck before its step
    # When it runs
    run = run_under_torchrun(sys.executable, "lightning_rank_never_arrives.py", tmp_path)
    # Then rank 0 gives up in the gradient all-reduce after the package's timeout (not Lightning's 30 minutes), and
    # the failure file says which rank never arrived
    assert run.returncode != 0, run.output
    assert run.failure_reason.startswith(f"{REASON_OF_RANK_0}rank 1 on algo-1 never reached it."), run.failure_reason
