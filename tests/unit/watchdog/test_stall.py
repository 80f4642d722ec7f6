"""When a training job counts as stalled: only in `Training`, only when every host is silent, silence measured from
when it entered `Training` or its newest line, whichever is later."""

from __future__ import annotations

from datetime import timedelta

import pytest
from job_watchdog.stall import StreamRead, assess, host_silences, last_lines, training_since

from watchdog.samples import ALLOWED, JOB, LOG_GROUP, STREAMS, TRAINING_SINCE, at, training_job

BOTH_SILENT = {STREAMS["algo-1"]: at(12), STREAMS["algo-2"]: at(2)}


@pytest.mark.parametrize("secondary_status", ["Starting", "LaunchingMLInstances", "PreparingTrainingStack",
                                              "Downloading", "DownloadingTrainingImage", "Restarting", "Pending",
                                              "Uploading", "Stopping"])
def test_a_job_that_is_not_training_is_never_stalled_however_long_it_has_waited(secondary_status):
    # Given a job created hours ago that has logged nothing, in a secondary status other than Training
    job = training_job(SecondaryStatus=secondary_status)
    # When it is assessed a day later Then it is left alone
    assert assess(job, {}, at(24 * 60), ALLOWED) is None


def test_a_stopping_job_is_left_alone():
    job = training_job(TrainingJobStatus="Stopping", SecondaryStatus="Stopping")
    assert training_since(job) is None and assess(job, {}, at(24 * 60), ALLOWED) is None


def test_silence_is_measured_from_entering_training_not_from_creation():
    # Given a job created at 05:00 that downloaded until 05:40, and has not logged a line since
    job = training_job()
    assert training_since(job) == TRAINING_SINCE
    # When it is assessed 100 minutes after creation but 60 after training began Then it is not stalled
    assert assess(job, {}, at(60), ALLOWED) is None
    # And a minute later it is, silent since training began
    stall = assess(job, {}, at(61), ALLOWED)
    assert stall is not None and stall.silent_since == TRAINING_SINCE


def test_a_job_is_stalled_once_every_host_has_been_silent_for_longer_than_allowed():
    # Given algo-2 silent since 2 minutes into training (its ranks do not log) and algo-1 since 12
    job = training_job()
    # When assessed at 72 minutes (exactly 60 after algo-1's last line) Then not yet; at 73 it is
    assert assess(job, BOTH_SILENT, at(72), ALLOWED) is None
    stall = assess(job, BOTH_SILENT, at(73), ALLOWED)
    # Then the stall starts at the job's newest line, and names each host's stream, the first silent first
    assert stall.job_name == JOB and stall.silent_since == at(12)
    assert [(host.host, host.log_stream, host.last_line_at) for host in stall.hosts] == [
        ("algo-2", STREAMS["algo-2"], at(2)), ("algo-1", STREAMS["algo-1"], at(12))]


def test_one_host_still_logging_keeps_the_job_running():
    lines = {STREAMS["algo-1"]: at(300), STREAMS["algo-2"]: at(2)}
    assert assess(training_job(), lines, at(301), ALLOWED) is None


def test_a_job_that_entered_training_again_after_an_interruption_is_measured_from_its_return():
    # Given a spot job that trained from 05:40, was interrupted and re-entered Training four hours later
    job = training_job()
    job["SecondaryStatusTransitions"] += [
        {"Status": "Interrupted", "StartTime": at(60), "StatusMessage": "interrupted"},
        {"Status": "Training", "StartTime": at(240), "StatusMessage": "Training resumed"}]
    # When assessed 30 minutes after its return, its lines all from before the interruption Then it is not stalled
    assert training_since(job) == at(240)
    assert assess(job, BOTH_SILENT, at(270), ALLOWED) is None


def test_a_hosts_newest_stream_speaks_for_it_and_other_jobs_streams_are_ignored():
    # Given algo-1 restarted (a second, newer stream), and a job whose name extends this one's
    lines = {STREAMS["algo-1"]: at(5), f"{JOB}/algo-1-1793530000": at(90), f"{JOB}x/algo-2-1793511601": at(95),
             f"{JOB}/algo-2-1793530001": None}
    hosts = {host.host: host for host in host_silences(JOB, ["algo-1", "algo-2"], lines)}
    assert (hosts["algo-1"].log_stream, hosts["algo-1"].last_line_at) == (f"{JOB}/algo-1-1793530000", at(90))
    # algo-2 has only an empty stream of its own: the other job's line does not count
    assert (hosts["algo-2"].log_stream, hosts["algo-2"].last_line_at) == (f"{JOB}/algo-2-1793530001", None)


def test_a_host_without_a_stream_is_reported_as_never_having_logged():
    stall = assess(training_job(), {STREAMS["algo-1"]: at(1)}, at(90), ALLOWED)
    assert [(host.host, host.log_stream) for host in stall.hosts] == [("algo-2", None), ("algo-1", STREAMS["algo-1"])]


def test_the_notification_names_the_job_each_hosts_stream_and_when_it_fell_silent():
    stall = assess(training_job(), BOTH_SILENT, at(73), ALLOWED)
    message = stall.notification(at(73), LOG_GROUP)
    assert stall.subject() == f"Stalled training job stopped: {JOB}" and len(stall.subject()) <= 100
    assert message["job_name"] == JOB and message["first_silent_host"] == "algo-2"
    assert message["silent_since"] == "2026-11-01T05:52:00Z" and message["training_since"] == "2026-11-01T05:40:00Z"
    assert message["hosts"] == [
        {"host": "algo-2", "log_stream": STREAMS["algo-2"], "last_line_at": "2026-11-01T05:42:00Z"},
        {"host": "algo-1", "log_stream": STREAMS["algo-1"], "last_line_at": "2026-11-01T05:52:00Z"}]
    assert message["reason"] == ("no host logged a line for 61 min (since 2026-11-01T05:52:00Z), longer than the "
                                 "60 min allowed (algo-2: last line at 2026-11-01T05:42:00Z; algo-1: last line at "
                                 "2026-11-01T05:52:00Z)")


def test_short_silences_read_in_seconds():
    stall = assess(training_job(), {}, TRAINING_SINCE + timedelta(seconds=9), timedelta(seconds=6))
    assert stall.reason(TRAINING_SINCE + timedelta(seconds=9)).startswith("no host logged a line for 9 s")


@pytest.mark.parametrize(("listed", "read", "newest"), [
    # a line read back later than the listing's, which lags: the read one
    (at(12), StreamRead(at(12), at(70), reached_start=True), at(70)),
    # the listing's line read back: that one
    (at(12), StreamRead(at(12), at(12), reached_start=True), at(12)),
    # nothing since training began, read back to its start, and the listing's line is older: the listing's
    (at(-5), StreamRead(TRAINING_SINCE, None, reached_start=True), at(-5)),
    # a stream that holds no line at all
    (None, StreamRead(TRAINING_SINCE, None, reached_start=True), None),
])
def test_a_streams_newest_line_is_the_later_of_the_listed_and_the_read_one(listed, read, newest):
    assert last_lines({STREAMS["algo-1"]: listed}, {STREAMS["algo-1"]: read}) == ({STREAMS["algo-1"]: newest}, [])


@pytest.mark.parametrize(("listed", "read"), [
    # empty pages until the read gave up, short of the start of its range
    (at(60), StreamRead(at(60), None, reached_start=False)),
    (None, StreamRead(TRAINING_SINCE, None, reached_start=False)),
    # back at the start of the range without the line the listing knows of in it
    (at(60), StreamRead(at(60), None, reached_start=True)),
])
def test_a_line_the_read_could_not_show_is_unknown_not_silent(listed, read):
    assert last_lines({STREAMS["algo-1"]: listed}, {STREAMS["algo-1"]: read}) == ({}, [STREAMS["algo-1"]])
