"""A sweep end to end on real botocore clients under Stubbers: every call is checked against the service model, and
a call a test did not expect fails it (that is how "never stops" and "never reads a stream" are proven)."""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import botocore.endpoint
import pytest
from botocore.awsrequest import AWSResponse
from botocore.stub import Stubber
from job_watchdog import aws_clients, service
from job_watchdog.jobs_and_logs import MAX_EMPTY_PAGES, JobsAndLogs
from job_watchdog.observability import metrics
from job_watchdog.settings import settings_from_environ

from stubbed_clients import published, stubbed
from watchdog.samples import JOB, LOG_GROUP, STREAMS, TOPIC_ARN, at, stack_environ, training_job

HANDLER_FILE = Path(__file__).resolve().parents[3] / "lambda" / "watchdog" / "handler.py"
SETTINGS = settings_from_environ(stack_environ())
# Another of the project's jobs, running beside the sample job.
OTHER_JOB = "ranker-web-search-2026-11-01-7d3e9a1b20"


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


@dataclass
class Stubs:
    sagemaker: Stubber
    logs: Stubber
    sns: Stubber

    def jobs(self) -> JobsAndLogs:
        return JobsAndLogs(LOG_GROUP, sagemaker=self.sagemaker.client, logs=self.logs.client, sns=self.sns.client)

    def running(self, *names: str, next_token: str | None = None, token: str | None = None) -> None:
        request = {"StatusEquals": "InProgress", "NameContains": "ranker-", "MaxResults": 100}
        answer = {"TrainingJobSummaries": [
            {"TrainingJobName": name, "TrainingJobArn": f"arn:aws:sagemaker:eu-west-1:123456789012:training-job/{name}",
             "CreationTime": at(-40), "TrainingJobStatus": "InProgress"} for name in names]}
        self.sagemaker.add_response("list_training_jobs", {**answer, **({"NextToken": next_token} if next_token
                                                                        else {})},
                                    {**request, **({"NextToken": token} if token else {})})

    def described(self, job: str = JOB, **changes) -> None:
        self.sagemaker.add_response("describe_training_job", training_job(TrainingJobName=job, **changes),
                                    {"TrainingJobName": job})

    def listed(self, job: str = JOB, **last_event: datetime) -> None:
        """DescribeLogStreams' answer: each host's stream with the (possibly lagging) time of its last event, and
        when CloudWatch received it (a second later)."""
        self.logs.add_response("describe_log_streams", {"logStreams": [
            {"logStreamName": _stream(job, host.replace("_", "-")), "lastEventTimestamp": _ms(moment),
             "lastIngestionTime": _ms(moment) + 1000} for host, moment in last_event.items()]},
            {"logGroupName": LOG_GROUP, "logStreamNamePrefix": f"{job}/"})

    def newest_line(self, host: str, moment: datetime, *, since: datetime, job: str = JOB) -> None:
        """GetLogEvents' first page back from the stream's end, read from `since` on, holding its newest line."""
        self.logs.add_response("get_log_events", {"events": [{"timestamp": _ms(moment), "message": "step=10",
                                                              "ingestionTime": _ms(moment) + 900}],
                                                  "nextBackwardToken": "b/1", "nextForwardToken": "f/1"},
                               _read_request(_stream(job, host), since))

    def empty_pages(self, host: str, count: int, *, since: datetime, back_at_start: bool = False) -> None:
        """`count` empty pages back from the stream's end, each with a new token; with `back_at_start` one more that
        returns the token it was given (the start of the range)."""
        request = _read_request(STREAMS[host], since)
        tokens = [f"b/{number}" for number in range(1, count + 1)] + (["b/" + str(count)] if back_at_start else [])
        for number, token in enumerate(tokens):
            self.logs.add_response("get_log_events", {"events": [], "nextBackwardToken": token,
                                                      "nextForwardToken": "f/0"},
                                   {**request, **({"nextToken": tokens[number - 1]} if number else {})})

    def hung_job(self) -> None:
        """The sample job, training since 05:40, whose hosts last logged at 05:52 (algo-1) and 05:42 (algo-2), as both
        the listing and the streams show."""
        self.described()
        self.listed(algo_1=at(12), algo_2=at(2))
        self.newest_line("algo-1", at(12), since=at(12))
        self.newest_line("algo-2", at(2), since=at(2))

    def published(self) -> list[dict]:
        """Every SNS message, read off the client's own hook."""
        return published(self.sns.client)


def _stream(job: str, host: str) -> str:
    return STREAMS[host].replace(JOB, job)


def _read_request(stream: str, since: datetime) -> dict:
    return {"logGroupName": LOG_GROUP, "logStreamName": stream, "startTime": _ms(since), "startFromHead": False,
            "limit": 1}


@pytest.fixture
def stubs() -> Iterator[Stubs]:
    with stubbed("sagemaker", "logs", "sns") as stubbers:
        yield Stubs(*stubbers)


@pytest.fixture
def no_earlier_metrics() -> Iterator[None]:
    """Metrics start empty, as in an invocation (the handler's decorator flushes them at its end)."""
    metrics.clear_metrics()
    yield
    metrics.clear_metrics()


def _emitted() -> dict:
    """The metric values added since, as the EMF record hands them to CloudWatch: namespace, dimensions, values."""
    record = metrics.serialize_metric_set()
    [directive] = record["_aws"]["CloudWatchMetrics"]
    return {"namespace": directive["Namespace"], "dimensions": {name: record[name] for [name] in
                                                                directive["Dimensions"]},
            **{metric["Name"]: record[metric["Name"]] for metric in directive["Metrics"]}}


def test_a_job_whose_hosts_fell_silent_is_stopped_and_the_team_told_which_host_when(stubs):
    # Given a two-host job training since 05:40 whose hosts last logged at 05:42 (algo-2) and 05:52 (algo-1)
    stubs.running(JOB)
    stubs.hung_job()
    stubs.sagemaker.add_response("stop_training_job", {}, {"TrainingJobName": JOB})
    stubs.sns.add_response("publish", {"MessageId": "1"}, None)
    sent = stubs.published()
    # When the watchdog sweeps at 06:53, 61 minutes after the job's newest line
    result = service.handle_event({}, SETTINGS, stubs.jobs(), now=at(73))
    # Then the job is stopped, and the message names it, the host that fell silent first and each stream's last line
    assert result["stopped"] == [JOB] and result["checked"] == 1
    assert sent[0]["TopicArn"] == TOPIC_ARN and sent[0]["Subject"] == f"Stalled training job stopped: {JOB}"
    message = json.loads(sent[0]["Message"])
    assert (message["job_name"], message["first_silent_host"], message["silent_since"]) == (
        JOB, "algo-2", "2026-11-01T05:52:00Z")
    assert [(host["host"], host["log_stream"], host["last_line_at"]) for host in message["hosts"]] == [
        ("algo-2", STREAMS["algo-2"], "2026-11-01T05:42:00Z"), ("algo-1", STREAMS["algo-1"], "2026-11-01T05:52:00Z")]


def test_streams_the_listing_shows_active_are_not_read_and_the_job_not_stopped(stubs):
    # Given algo-1's stream listed with a line a minute ago: no GetLogEvents, no stop may follow (the Stubber fails)
    stubs.running(JOB)
    stubs.described()
    stubs.listed(algo_1=at(300), algo_2=at(2))
    result = service.handle_event({}, SETTINGS, stubs.jobs(), now=at(301))
    assert result["stopped"] == [] and result["jobs"][0]["outcome"] == "making progress"


def test_a_listing_that_lags_behind_the_logs_does_not_stop_a_job_that_is_logging(stubs):
    # Given DescribeLogStreams' times, which CloudWatch updates eventually, still at 05:52, while algo-1's stream
    # holds a line from a minute ago
    stubs.running(JOB)
    stubs.described()
    stubs.listed(algo_1=at(12), algo_2=at(2))
    stubs.newest_line("algo-1", at(300), since=at(12))
    stubs.newest_line("algo-2", at(2), since=at(2))
    # When the watchdog sweeps Then it reads the streams and leaves the job running
    result = service.handle_event({}, SETTINGS, stubs.jobs(), now=at(301))
    assert result["stopped"] == [] and result["jobs"][0]["outcome"] == "making progress"


@pytest.mark.parametrize("secondary_status", ["Starting", "Downloading", "DownloadingTrainingImage"])
def test_a_job_slow_to_start_is_left_alone_without_reading_its_logs(stubs, secondary_status):
    # Given a job created five hours ago still preparing (only DescribeTrainingJob may be called)
    stubs.running(JOB)
    stubs.described(SecondaryStatus=secondary_status)
    result = service.handle_event({}, SETTINGS, stubs.jobs(), now=at(300))
    assert result["jobs"] == [{"job_name": JOB, "outcome": "not training", "secondary_status": secondary_status}]


def test_a_job_that_began_training_lately_is_left_alone_without_reading_its_logs(stubs):
    stubs.running(JOB)
    stubs.described()
    assert service.handle_event({}, SETTINGS, stubs.jobs(), now=at(59))["jobs"][0]["outcome"] == "making progress"


def test_a_job_another_sweep_stopped_first_is_not_reported_twice(stubs):
    # Given a stalled job that SageMaker no longer lets stop (a concurrent sweep stopped it a moment ago)
    stubs.running(JOB)
    stubs.hung_job()
    stubs.sagemaker.add_client_error("stop_training_job", "ValidationException",
                                     "The request was rejected because the training job is in status Stopping.",
                                     expected_params={"TrainingJobName": JOB})
    # When this sweep finds it Then it publishes nothing (a publish would fail the SNS Stubber)
    result = service.handle_event({}, SETTINGS, stubs.jobs(), now=at(73))
    assert result["stopped"] == [] and result["jobs"][0]["outcome"] == "already stopping"


def test_other_projects_jobs_are_not_checked_and_every_page_is_read(stubs):
    # Given two pages of InProgress jobs whose names contain "ranker-", one of another project's
    stubs.running("team-ranker-1", next_token="page-2")
    stubs.running(JOB, token="page-2")
    stubs.described(SecondaryStatus="Downloading")
    # When the watchdog sweeps Then only the project's job is described (another describe would fail the Stubber)
    assert service.handle_event({}, SETTINGS, stubs.jobs(), now=at(300))["checked"] == 1


def test_a_job_without_any_log_stream_is_stopped_once_training_has_been_silent_for_too_long(stubs):
    # Given no log group yet (no job of the account has logged): the job's script never printed a line
    stubs.running(JOB)
    stubs.described()
    stubs.logs.add_client_error("describe_log_streams", "ResourceNotFoundException", "The specified log group does "
                                "not exist.", expected_params={"logGroupName": LOG_GROUP,
                                                              "logStreamNamePrefix": f"{JOB}/"})
    stubs.sagemaker.add_response("stop_training_job", {}, {"TrainingJobName": JOB})
    stubs.sns.add_response("publish", {"MessageId": "1"}, None)
    sent = stubs.published()
    service.handle_event({}, SETTINGS, stubs.jobs(), now=at(61))
    hosts = json.loads(sent[0]["Message"])["hosts"]
    assert hosts == [{"host": "algo-1", "log_stream": None, "last_line_at": None},
                     {"host": "algo-2", "log_stream": None, "last_line_at": None}]


def test_an_empty_page_with_a_token_is_followed_to_the_streams_newest_line(stubs):
    # Given GetLogEvents answering first with an empty page and a token (the API allows it), then with the line
    stubs.empty_pages("algo-1", 1, since=at(0))
    stubs.logs.add_response("get_log_events", {"events": [{"timestamp": _ms(at(7)), "message": "x"}],
                                               "nextBackwardToken": "b/3", "nextForwardToken": "f/3"},
                            {**_read_request(STREAMS["algo-1"], at(0)), "nextToken": "b/1"})
    read = stubs.jobs().newest_line(STREAMS["algo-1"], at(0))
    assert (read.newest, read.reached_start) == (at(7), True)


def test_the_handler_reads_the_environment_and_sweeps(monkeypatch, stubs):
    # Given the stack's environment and the handler module as the runtime loads it (`handler.lambda_handler`)
    for name, value in stack_environ().items():
        monkeypatch.setenv(name, value)
    spec = importlib.util.spec_from_file_location("watchdog_handler", HANDLER_FILE)
    handler = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(handler)
    service.load_settings.cache_clear()
    monkeypatch.setattr(service, "JobsAndLogs", lambda log_group: stubs.jobs())
    stubs.running()
    context = type("Context", (), {"function_name": "watchdog", "memory_limit_in_mb": 256,
                                   "invoked_function_arn": "arn:aws:lambda:eu-west-1:123456789012:function:w",
                                   "aws_request_id": "1", "get_remaining_time_in_millis": lambda self: 119_000})()
    # When EventBridge's scheduled event arrives and no job is running Then it answers with an empty sweep
    scheduled = {"version": "0", "id": "1", "detail-type": "Scheduled Event", "source": "aws.events",
                 "account": "123456789012", "time": "2026-11-01T06:00:00Z", "region": "eu-west-1",
                 "resources": ["arn:aws:events:eu-west-1:123456789012:rule/ranker-watchdog"], "detail": {}}
    assert handler.lambda_handler(scheduled, context) == {"checked": 0, "stopped": [], "unchecked": [], "jobs": []}
    service.load_settings.cache_clear()


@pytest.mark.parametrize("back_at_start", [False, True], ids=["gave up on empty pages", "empty back to its start"])
def test_a_line_listed_70_minutes_ago_that_reads_back_as_empty_pages_does_not_stop_the_job(stubs, back_at_start):
    # Given a job whose algo-1 stream DescribeLogStreams lists with a line 70 minutes ago (algo-2 went quiet early),
    # while GetLogEvents answers algo-1's read with empty pages: until the watchdog gives up, or back to the start
    # of the range without the line the listing knows of
    stubs.running(JOB)
    stubs.described()
    stubs.listed(algo_1=at(60), algo_2=at(2))
    stubs.empty_pages("algo-1", MAX_EMPTY_PAGES if not back_at_start else 1, since=at(60),
                      back_at_start=back_at_start)
    stubs.newest_line("algo-2", at(2), since=at(2))
    # When the watchdog sweeps 70 minutes after that line, 10 more than allowed
    result = service.handle_event({}, SETTINGS, stubs.jobs(), now=at(130))
    # Then algo-1's newest line is unknown, never silent: no stop, no message (the Stubbers fail on either), and the
    # job is reported unchecked, naming the stream
    assert result["stopped"] == [] and result["unchecked"] == [JOB]
    assert STREAMS["algo-1"] in result["jobs"][0]["reason"]


@pytest.mark.parametrize("failure", ["DescribeTrainingJob throttled", "DescribeLogStreams denied",
                                     "GetLogEvents throttled"])
def test_a_call_that_fails_for_one_job_leaves_it_unchecked_and_the_hung_job_beside_it_is_stopped(
        stubs, no_earlier_metrics, failure):
    # Given two running jobs, listed in that order: one whose call fails after the client's retries, and the hung
    # sample job (both hosts silent for 61 minutes)
    stubs.running(OTHER_JOB, JOB)
    operation, code = {"DescribeTrainingJob throttled": ("DescribeTrainingJob", "ThrottlingException"),
                       "DescribeLogStreams denied": ("DescribeLogStreams", "AccessDeniedException"),
                       "GetLogEvents throttled": ("GetLogEvents", "ThrottlingException")}[failure]
    if operation == "DescribeTrainingJob":
        stubs.sagemaker.add_client_error("describe_training_job", code, "Rate exceeded",
                                         expected_params={"TrainingJobName": OTHER_JOB})
    else:
        stubs.described(OTHER_JOB)
        if operation == "DescribeLogStreams":
            stubs.logs.add_client_error("describe_log_streams", code, "not authorized to perform: "
                                        "logs:DescribeLogStreams", expected_params={
                                            "logGroupName": LOG_GROUP, "logStreamNamePrefix": f"{OTHER_JOB}/"})
        else:
            stubs.listed(OTHER_JOB, algo_1=at(12), algo_2=at(2))
            stubs.logs.add_client_error("get_log_events", code, "Rate exceeded",
                                        expected_params=_read_request(_stream(OTHER_JOB, "algo-1"), at(12)))
    stubs.hung_job()
    stubs.sagemaker.add_response("stop_training_job", {}, {"TrainingJobName": JOB})
    stubs.sns.add_response("publish", {"MessageId": "1"}, None)
    sent = stubs.published()
    # When the watchdog sweeps
    result = service.handle_event({}, SETTINGS, stubs.jobs(), now=at(73))
    # Then the hung job is stopped and the team told about it, in the one message of the sweep
    assert result["stopped"] == [JOB]
    assert [message["Subject"] for message in sent] == [f"Stalled training job stopped: {JOB}"]
    # and the other job is reported unchecked, naming the call that failed and why, and counted for the alarm
    assert result["unchecked"] == [OTHER_JOB] and result["checked"] == 1
    assert result["jobs"][0]["reason"].startswith(f"{operation} failed: {code}: ")
    # (in the namespace and under the `service` dimension the stack's alarm reads them from: tests/infrastructure)
    emitted = _emitted()
    assert (emitted["namespace"], emitted["dimensions"]) == (os.environ["POWERTOOLS_METRICS_NAMESPACE"],
                                                             {"service": os.environ["POWERTOOLS_SERVICE_NAME"]})
    assert (emitted[service.JOBS_UNCHECKED], emitted[service.STALLED_JOBS_STOPPED]) == ([1.0], [1.0])


def test_a_job_left_unchecked_sweep_after_sweep_is_never_published(stubs, no_earlier_metrics):
    # Given a job whose DescribeTrainingJob is throttled on three sweeps in a row
    for _ in range(3):
        stubs.running(OTHER_JOB)
        stubs.sagemaker.add_client_error("describe_training_job", "ThrottlingException", "Rate exceeded",
                                         expected_params={"TrainingJobName": OTHER_JOB})
    sent = stubs.published()
    # When the watchdog sweeps three times
    results = [service.handle_event({}, SETTINGS, stubs.jobs(), now=at(minutes)) for minutes in (70, 80, 90)]
    # Then each sweep reports it unchecked and counts it, and none publishes: the one message is the alarm's, which
    # CloudWatch sends when the alarm enters ALARM, not for every datapoint that keeps it there
    assert [result["unchecked"] for result in results] == [[OTHER_JOB]] * 3
    assert sent == [] and _emitted()[service.JOBS_UNCHECKED] == [1.0, 1.0, 1.0]


def test_no_check_starts_once_the_function_is_about_to_time_out(stubs):
    # Given two running jobs and a function whose time runs low after the first one's check
    stubs.running(JOB, OTHER_JOB)
    stubs.described(SecondaryStatus="Downloading")
    left = iter([100.0, service.RESERVE_SECONDS - 1])
    # When the watchdog sweeps Then the second job is not described (the Stubber fails on a call) but reported
    result = service.handle_event({}, SETTINGS, stubs.jobs(), now=at(90), remaining_seconds=lambda: next(left))
    assert [job["outcome"] for job in result["jobs"]] == ["not training", "unchecked"]
    assert result["unchecked"] == [OTHER_JOB] and "before its timeout" in result["jobs"][1]["reason"]


def test_every_job_is_checked_first_by_some_sweep_and_each_keeps_its_place_after_the_others():
    # Given the same four running jobs, in ListTrainingJobs' stable order, on 40 scheduled sweeps (each event's id new)
    names = [f"ranker-job-{number}" for number in range(4)]
    orders = [service.sweep_order(names, {"id": f"5e0c7a35-0d9c-4c0e-9b1e-{number:012d}"}) for number in range(40)]
    # Then every job is checked first by at least one sweep, and each order is the list turned round
    assert {order[0] for order in orders} == set(names)
    assert all(order == names[names.index(order[0]):] + names[:names.index(order[0])] for order in orders)
    # and a person's invocation, without an id, checks them in the listed order
    assert service.sweep_order(names, {}) == names


def test_a_stopped_job_whose_message_fails_is_reported_stopped_and_the_sweep_goes_on(stubs):
    # Given the hung sample job, then a job still downloading, and a topic that refuses the publish
    stubs.running(JOB, OTHER_JOB)
    stubs.hung_job()
    stubs.sagemaker.add_response("stop_training_job", {}, {"TrainingJobName": JOB})
    stubs.sns.add_client_error("publish", "AuthorizationError", "not authorized to perform: SNS:Publish")
    stubs.described(OTHER_JOB, SecondaryStatus="Downloading")
    # When the watchdog sweeps
    result = service.handle_event({}, SETTINGS, stubs.jobs(), now=at(73))
    # Then the stop counts as a stop, its report says the topic was not told, and the next job is still checked
    assert result["stopped"] == [JOB] and result["unchecked"] == []
    assert "AuthorizationError" in result["jobs"][0]["notification_error"]
    assert result["jobs"][1]["outcome"] == "not training"


class _Body:
    def __init__(self, content: bytes) -> None:
        self._content = content

    def stream(self, **_) -> Iterator[bytes]:
        yield self._content


def test_a_throttled_log_call_is_retried_by_the_clients_own_retry_mode_then_leaves_its_job_unchecked(
        stubs, monkeypatch):
    # Given the watchdog's CloudWatch Logs client as it creates it, in an environment asking for another retry mode
    # (botocore's default before it became standard), whose every DescribeLogStreams request CloudWatch answers with
    # HTTP 400 ThrottlingException (botocore's `before-send` hook returns that answer instead of sending it)
    monkeypatch.setenv("AWS_RETRY_MODE", "legacy")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "10")
    logs = aws_clients.logs_client.__wrapped__()
    requests, waits = [], []
    throttled = json.dumps({"__type": "ThrottlingException", "message": "Rate exceeded"}).encode()

    def answer(request, **_):
        requests.append(request)
        return AWSResponse(request.url, 400, {"x-amzn-RequestId": str(len(requests))}, _Body(throttled))

    logs.meta.events.register("before-send.cloudwatch-logs.DescribeLogStreams", answer)
    monkeypatch.setattr(botocore.endpoint, "time", type("Clock", (), {"sleep": staticmethod(waits.append)}))
    stubs.running(JOB)
    stubs.described()
    jobs = JobsAndLogs(LOG_GROUP, sagemaker=stubs.sagemaker.client, logs=logs, sns=stubs.sns.client)
    # When the watchdog sweeps
    result = service.handle_event({}, SETTINGS, jobs, now=at(73))
    # Then botocore's standard mode tried it 3 times with jittered backoff (at most 1 s, then 2 s), no hand-written
    # loop more, and the job is unchecked, not stopped
    assert len(requests) == 3 and len(waits) == 2 and waits[0] <= 1 and waits[1] <= 2
    assert result["unchecked"] == [JOB]
    assert result["jobs"][0]["reason"] == "DescribeLogStreams failed: ThrottlingException: Rate exceeded"
