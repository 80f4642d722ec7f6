"""The stalled-job watchdog through the deployed pipeline in local mode: the synthesized function, unchanged, on its
schedule, reading each host's log stream from moto's CloudWatch Logs and stopping jobs through local SageMaker.

The stack's minutes are seconds here (`WatchdogTiming`): a job is stopped after 20 s of silence on every host, more
than a job takes from entering Training to its first line here (torchrun's rendezvous, importing the script), and
the watchdog looks every 5 s, longer than one sweep takes on this machine, so sweeps keep to their schedule.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

import pytest
from shared_stacks import PLAIN_SCRIPTS

from local_mode.cli import render_summary
from local_mode.demo import DemoResult, bring_your_own_context, run_demo_job
from local_mode.pipeline import LocalPipeline
from local_mode.aws.watchdog_schedule import WatchdogTiming

pytestmark = pytest.mark.slow

TIMING = WatchdogTiming(stall_seconds=20, period_seconds=5)
# From a sweep's tick to its decision: a Python process starting and importing botocore and Powertools, on 2 cores
# shared with other work.
SWEEP_START_SECONDS = 5
HANGS = dataclasses.replace(PLAIN_SCRIPTS, entry_point="hangs_after_steps.py", distribution="torch_distributed")


def _moment(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@pytest.fixture(scope="module")
def watched_pipeline(moto, tmp_path_factory) -> Iterator[LocalPipeline]:
    # The PyTorch 2.2.0 container's rules allow torch_distributed on the demo's instance type; hosts run this Python.
    # The stack of test_bring_your_own's plain script (one synthesis for both): the manifests name the scripts here.
    with LocalPipeline(jobs_dir=tmp_path_factory.mktemp("watched-jobs"), stop_grace_seconds=5, moto=moto,
                       context={"framework_version": "2.2.0", **bring_your_own_context(PLAIN_SCRIPTS)},
                       watchdog_timing=TIMING) as pipeline:
        yield pipeline


@dataclasses.dataclass(frozen=True)
class WatchedJobs:
    hung: DemoResult
    steady: DemoResult
    published: dict[str, list[dict[str, Any]]]
    """The notification topic's messages while both ran, by the job they are about."""
    read_later: Callable[[], list[dict[str, Any]]]
    """Reads what the topic publishes after that."""


@pytest.fixture(scope="module")
def watched_jobs(watched_pipeline, notification_queue, letor_data, tmp_path_factory) -> Iterator[WatchedJobs]:
    """A hung 2-host job and a 2-host job that keeps logging on one host only, run side by side: each of them waits out
    wall-clock silences longer than the watchdog allows, so together they wait once."""
    # Given a 2-host job whose script logs three steps on rank 0 (algo-1), its start on algo-2, then hangs
    hung = dataclasses.replace(HANGS, work_dir=tmp_path_factory.mktemp("hung"))
    # and a 2-host job logging a step a second on algo-1 for 30 s while algo-2 stays silent after its start: longer
    # than the allowed silence, so the watchdog sweeps it several times
    steady = dataclasses.replace(HANGS, entry_point="logs_steadily.py", hyperparameters=(("steps", "30"),),
                                 work_dir=tmp_path_factory.mktemp("steady"))
    with notification_queue(watched_pipeline, "watchdog-notifications") as read:
        # When their datasets land and the trigger starts them, while the watchdog runs on its schedule
        with ThreadPoolExecutor(max_workers=2) as pool:
            results = list(pool.map(lambda options: run_demo_job(watched_pipeline, options, letor_data),
                                    (hung, steady)))
        published: dict[str, list[dict[str, Any]]] = {}
        while messages := read():
            for message in messages:
                published.setdefault(json.loads(message["Message"])["job_name"], []).append(message)
        yield WatchedJobs(*results, published=published, read_later=read)


def test_a_hung_two_host_job_is_stopped_within_the_silence_plus_one_period(watched_pipeline, watched_jobs):
    result = watched_jobs.hung
    # Then the watchdog stopped it
    assert result.status == "Stopped", result.failure_reason
    stop = watched_pipeline.stopped_by_watchdog(result.job_name)
    assert stop is not None, watched_pipeline.watchdog_errors
    # after more than the allowed silence, and no later than one period (and a sweep's start-up) after that (the
    # report's times are whole seconds)
    silent = (_moment(stop["stopped_at"]) - _moment(stop["silent_since"])).total_seconds()
    assert TIMING.stall_seconds - 1 <= silent <= TIMING.stall_seconds + TIMING.period_seconds + SWEEP_START_SECONDS, (
        stop)
    # and SageMaker's record shows the stop at that moment, after the job had entered Training
    description = watched_pipeline.sagemaker.describe_training_job(TrainingJobName=result.job_name)
    stopping = next(step for step in description["SecondaryStatusTransitions"] if step["Status"] == "Stopping")
    assert abs((stopping["StartTime"] - _moment(stop["stopped_at"])).total_seconds()) < SWEEP_START_SECONDS

    # And the team is told once: which job, which host's stream fell silent first, and when each host last logged
    [published] = watched_jobs.published.get(result.job_name, [])
    message = json.loads(published["Message"])
    assert published["Subject"] == f"Stalled training job stopped: {result.job_name}"
    assert (message["job_name"], message["first_silent_host"]) == (result.job_name, "algo-2")
    assert [host["host"] for host in message["hosts"]] == ["algo-2", "algo-1"]
    assert all(host["log_stream"].startswith(f"{result.job_name}/{host['host']}-") and host["last_line_at"]
               for host in message["hosts"])
    assert message["silent_since"] == message["hosts"][-1]["last_line_at"]

    # And the demo summary says why the job stopped
    summary = render_summary(result)
    assert f"reason:    stopped by the stalled-job watchdog: {stop['reason']}" in summary, summary
    assert "no host logged a line for" in stop["reason"]

    # And a later sweep leaves the stopped job alone: nothing stopped, nothing published again
    assert watched_pipeline.sweep()["stopped"] == []
    assert watched_jobs.read_later() == []
    assert watched_pipeline.watchdog_errors == []


def test_a_job_that_keeps_logging_on_one_host_is_left_alone(watched_pipeline, watched_jobs):
    result = watched_jobs.steady
    # Then it completes untouched, and the only message is the registrar's about its model (not registered: the
    # script writes no serving handler)
    assert result.status == "Completed", result.failure_reason
    assert watched_pipeline.stopped_by_watchdog(result.job_name) is None
    assert [message["Subject"].split(":")[0] for message in watched_jobs.published.get(result.job_name, [])] == [
        "Model not registered"]
    # and nothing was published about a job other than the two
    assert set(watched_jobs.published) <= {watched_jobs.hung.job_name, result.job_name}
    assert watched_pipeline.watchdog_errors == []
