"""A sweep end to end on real botocore clients under Stubbers: every call is checked against the service model, and
a call a test did not expect fails it (that is how "never stops" and "never reads a stream" are proven)."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest
from botocore.stub import Stubber
from job_watchdog import service
from job_watchdog.jobs_and_logs import JobsAndLogs
from job_watchdog.settings import settings_from_environ

from stubbed_clients import published, stubbed
from watchdog.samples import JOB, LOG_GROUP, STREAMS, TOPIC_ARN, at, stack_environ, training_job

HANDLER_FILE = Path(__file__).resolve().parents[3] / "lambda" / "watchdog" / "handler.py"
SETTINGS = settings_from_environ(stack_environ())


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

    def described(self, **changes) -> None:
        self.sagemaker.add_response("describe_training_job", training_job(**changes), {"TrainingJobName": JOB})

    def listed(self, **last_event: datetime) -> None:
        """DescribeLogStreams' answer: each host's stream with the (possibly lagging) time of its last event."""
        self.logs.add_response("describe_log_streams", {"logStreams": [
            {"logStreamName": STREAMS[host.replace("_", "-")], "lastEventTimestamp": _ms(moment),
             "lastIngestionTime": _ms(moment)} for host, moment in last_event.items()]},
            {"logGroupName": LOG_GROUP, "logStreamNamePrefix": f"{JOB}/"})

    def newest_line(self, host: str, moment: datetime) -> None:
        self.logs.add_response("get_log_events", {"events": [{"timestamp": _ms(moment), "message": "step=10",
                                                              "ingestionTime": _ms(moment) + 900}],
                                                  "nextBackwardToken": "b/1", "nextForwardToken": "f/1"},
                               {"logGroupName": LOG_GROUP, "logStreamName": STREAMS[host], "startFromHead": False,
                                "limit": 1})

    def published(self) -> list[dict]:
        """Every SNS message, read off the client's own hook."""
        return published(self.sns.client)


@pytest.fixture
def stubs() -> Iterator[Stubs]:
    with stubbed("sagemaker", "logs", "sns") as stubbers:
        yield Stubs(*stubbers)


def test_a_job_whose_hosts_fell_silent_is_stopped_and_the_team_told_which_host_when(stubs):
    # Given a two-host job training since 05:40 whose hosts last logged at 05:42 (algo-2) and 05:52 (algo-1)
    stubs.running(JOB)
    stubs.described()
    stubs.listed(algo_1=at(12), algo_2=at(2))
    stubs.newest_line("algo-1", at(12))
    stubs.newest_line("algo-2", at(2))
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
    stubs.newest_line("algo-1", at(300))
    stubs.newest_line("algo-2", at(2))
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
    stubs.described()
    stubs.listed(algo_1=at(12), algo_2=at(2))
    stubs.newest_line("algo-1", at(12))
    stubs.newest_line("algo-2", at(2))
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
    request = {"logGroupName": LOG_GROUP, "logStreamName": STREAMS["algo-1"], "startFromHead": False, "limit": 1}
    stubs.logs.add_response("get_log_events", {"events": [], "nextBackwardToken": "b/2", "nextForwardToken": "f/2"},
                            request)
    stubs.logs.add_response("get_log_events", {"events": [{"timestamp": _ms(at(7)), "message": "x"}],
                                               "nextBackwardToken": "b/3", "nextForwardToken": "f/3"},
                            {**request, "nextToken": "b/2"})
    assert stubs.jobs().newest_line(STREAMS["algo-1"]) == at(7)


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
                                   "aws_request_id": "1"})()
    # When EventBridge's scheduled event arrives and no job is running Then it answers with an empty sweep
    scheduled = {"version": "0", "id": "1", "detail-type": "Scheduled Event", "source": "aws.events",
                 "account": "123456789012", "time": "2026-11-01T06:00:00Z", "region": "eu-west-1",
                 "resources": ["arn:aws:events:eu-west-1:123456789012:rule/ranker-watchdog"], "detail": {}}
    assert handler.lambda_handler(scheduled, context) == {"checked": 0, "stopped": [], "jobs": []}
    service.load_settings.cache_clear()
