"""Local mode's parts behind the watchdog: each host's log stream on moto's CloudWatch Logs, named as SageMaker names
it, and the schedule that delivers EventBridge's ticks."""

from __future__ import annotations

import threading
import time

import pytest

from local_mode.job_runtime.job_log_streams import HostLogStreams
from local_mode.aws.local_clients import local_client
from local_mode.aws.watchdog_schedule import LocalSchedule, schedule_seconds
from stacks.job_watchdog import TRAINING_LOG_GROUP


def test_each_hosts_lines_reach_its_own_stream_named_as_sagemaker_names_it(moto):
    # Given a job's streams on moto's CloudWatch Logs
    logs = local_client("logs", moto.url)
    streams = HostLogStreams(logs, "local-job-1", flush_seconds=0.05)
    # When two hosts print, one a blank line among its own
    for host, line in (("algo-1", "step=1"), ("algo-2", "rank 1 started"), ("algo-1", ""), ("algo-1", "step=2")):
        streams.put(host, line)
    streams.close()
    # Then each host's lines are in `<job>/algo-<n>-<epoch seconds>` of SageMaker's log group, in order, blanks left out
    names = {stream["logStreamName"] for stream in logs.describe_log_streams(
        logGroupName=TRAINING_LOG_GROUP, logStreamNamePrefix="local-job-1/")["logStreams"]}
    assert names == {streams.stream_name("algo-1"), streams.stream_name("algo-2")}
    epoch = int(streams.stream_name("algo-1").rsplit("-", 1)[1])
    assert streams.stream_name("algo-1") == f"local-job-1/algo-1-{epoch}" and abs(epoch - time.time()) < 60
    events = logs.get_log_events(logGroupName=TRAINING_LOG_GROUP, logStreamName=streams.stream_name("algo-1"),
                                 startFromHead=True)["events"]
    assert [event["message"] for event in events] == ["step=1", "step=2"]
    assert events[0]["timestamp"] <= events[1]["timestamp"]


def test_lines_arrive_while_the_job_runs_not_only_at_its_end(moto):
    logs = local_client("logs", moto.url)
    streams = HostLogStreams(logs, "local-job-2", flush_seconds=0.05)
    try:
        streams.put("algo-1", "step=1")
        # The stream is created before its first events are put: wait for events, not for the stream alone.
        deadline = time.monotonic() + 10
        while True:
            found = logs.describe_log_streams(logGroupName=TRAINING_LOG_GROUP,
                                              logStreamNamePrefix="local-job-2/")["logStreams"]
            if any("lastEventTimestamp" in stream for stream in found) or time.monotonic() >= deadline:
                break
            time.sleep(0.05)
        [stream] = found
        assert stream.get("lastEventTimestamp", 0) > 0, "no line reached the stream within 10 s of its put"
    finally:
        streams.close()


@pytest.mark.parametrize(("expression", "seconds"), [("rate(1 minute)", 60), ("rate(10 minutes)", 600),
                                                     ("rate(2 hours)", 7200), ("rate(1 day)", 86400)])
def test_rate_schedules_read_in_seconds(expression, seconds):
    assert schedule_seconds(expression) == seconds


def test_a_cron_schedule_is_refused_naming_what_local_mode_runs():
    with pytest.raises(ValueError, match=r"cron\(0 \* \* \* \? \*\).*rate\(<n> minutes\|hours\|days\)"):
        schedule_seconds("cron(0 * * * ? *)")


def test_the_schedule_ticks_each_period_and_a_failed_tick_does_not_end_it():
    # Given a schedule every 50 ms whose second tick fails
    ticks, errors, enough = [], [], threading.Event()

    def tick() -> None:
        ticks.append(time.monotonic())
        if len(ticks) == 2:
            raise RuntimeError("the handler crashed")
        if len(ticks) == 5:
            enough.set()

    started = time.monotonic()
    schedule = LocalSchedule(0.05, tick, errors.append).start()
    # When it runs for five ticks
    assert enough.wait(10)
    schedule.stop()
    # Then the failure was reported and the ticks went on, each on a period boundary of its own: a late tick (a busy
    # machine) skips the boundaries it missed instead of bursting to catch up, so the n-th tick is n periods in or later
    assert [str(error) for error in errors] == ["the handler crashed"]
    assert all(tick_time - started >= 0.05 * number for number, tick_time in enumerate(ticks, start=1))
