"""Throttling and quota: the trigger's SageMaker client retries throttling with backoff; when the retries run out
the handler raises, Lambda's asynchronous retries run it twice more, and the event lands in the dead-letter queue
(the on-failure destination, moto's SQS) with its body unchanged, from where it is replayed into exactly one job. A
quota (`ResourceLimitExceeded`), which no retry fixes, is rejected at once with SageMaker's message.

SageMaker is the local endpoint over HTTP, answering CreateTrainingJob with the service's error until healed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import botocore.endpoint
import handler
import pytest
from botocore.exceptions import ClientError
from training_trigger.aws_clients import SAGEMAKER_ATTEMPTS

from local_mode.job_runtime.job_runner import RunnerSettings
from local_mode.aws.local_clients import LOCAL_REGION, local_client
from local_mode.aws.moto_endpoint import MotoEndpoint
from local_mode.sagemaker_api.sagemaker_endpoint import LocalSageMaker
from local_mode.sagemaker_api.training_job_service import TrainingJobService
from reliability.faulty_sagemaker import FaultySageMaker
from reliability.lambda_async import AsyncInvoker, LambdaContext

CAPACITY_ERRORS = ["ThrottlingException"]
ATTEMPTS_PER_INVOCATION = SAGEMAKER_ATTEMPTS
LAMBDA_ASYNC_RETRIES = 2  # Lambda's maximum for asynchronous events; cdk.json's trigger_retry_attempts
# A failed invocation publishes no metric, which Powertools warns about: that is the expected outcome here.
pytestmark = pytest.mark.filterwarnings("ignore:No application metrics:UserWarning")


@pytest.fixture
def backoff_waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The waits botocore's endpoint takes between retries, recorded instead of slept (so the test takes no time)."""
    waits: list[float] = []

    class RecordingClock:
        def sleep(self, seconds: float) -> None:
            waits.append(seconds)

        def __getattr__(self, name: str) -> Any:
            return getattr(time, name)

    monkeypatch.setattr(botocore.endpoint, "time", RecordingClock())
    return waits


@pytest.fixture
def faulty_sagemaker(moto: MotoEndpoint, account: str, tmp_path: Path, point_trigger_at: Callable[[str], Any]
                     ) -> Iterator[Callable[[str, int | None], tuple[FaultySageMaker, str]]]:
    """Starts a local SageMaker whose CreateTrainingJob fails with `error_code`, points the trigger at it, and
    returns the service and its URL."""
    endpoints: list[LocalSageMaker] = []

    def start(error_code: str, failures: int | None) -> tuple[FaultySageMaker, str]:
        service = TrainingJobService(s3_endpoint_url=moto.url, account_id=account,
                                     settings=RunnerSettings(work_dir=tmp_path / "jobs", stop_grace_seconds=5))
        faulty = FaultySageMaker(service, operation="CreateTrainingJob", error_code=error_code, failures=failures)
        endpoints.append(LocalSageMaker(faulty).start())  # type: ignore[arg-type] (same call/stop_all interface)
        point_trigger_at(endpoints[-1].url)
        return faulty, endpoints[-1].url

    yield start
    for endpoint in endpoints:
        endpoint.stop()


def _jobs(sagemaker_url: str) -> list[str]:
    summaries = local_client("sagemaker", sagemaker_url).list_training_jobs()["TrainingJobSummaries"]
    return [summary["TrainingJobName"] for summary in summaries]


@pytest.mark.parametrize("error_code", CAPACITY_ERRORS)
def test_capacity_errors_are_retried_with_backoff_until_they_pass(error_code, faulty_sagemaker, backoff_waits,
                                                                  marker_event, account):
    # Given SageMaker answers the first three CreateTrainingJob calls with the capacity error
    failures = 3
    sagemaker, url = faulty_sagemaker(error_code, failures)
    # When the marker event is handled once
    result = handler.lambda_handler(marker_event, _context(account))
    # Then the client retried after a backoff wait each time, and the fourth call started the job
    assert result["status"] == "started", result
    assert sagemaker.requests["CreateTrainingJob"] == failures + 1
    assert len(backoff_waits) == failures and all(wait > 0 for wait in backoff_waits), backoff_waits
    # And the waits are jittered below a cap that doubles with each retry (1, 2, 4 s)
    assert all(wait <= 2 ** retry for retry, wait in enumerate(backoff_waits)), backoff_waits
    assert _jobs(url) == [result["job_name"]]


@pytest.mark.parametrize("error_code", CAPACITY_ERRORS)
def test_exhausted_retries_raise_so_lambda_keeps_the_event(error_code, faulty_sagemaker, backoff_waits, marker_event,
                                                           account):
    # Given SageMaker keeps answering with the capacity error
    sagemaker, url = faulty_sagemaker(error_code, None)
    # When the handler runs once
    with pytest.raises(ClientError) as raised:
        handler.lambda_handler(marker_event, _context(account))
    # Then it raised the service's error after every attempt the client allows, and started nothing
    assert raised.value.response["Error"]["Code"] == error_code
    assert sagemaker.requests["CreateTrainingJob"] == ATTEMPTS_PER_INVOCATION
    assert _jobs(url) == []


@pytest.mark.parametrize("error_code", CAPACITY_ERRORS)
def test_dead_lettered_event_keeps_its_body_and_replays_into_one_job(error_code, faulty_sagemaker, backoff_waits,
                                                                     marker_event, moto, account):
    # Given SageMaker answers every CreateTrainingJob with the capacity error, and the trigger's on-failure queue
    sagemaker, url = faulty_sagemaker(error_code, None)
    sqs = local_client("sqs", moto.url)
    queue_url = sqs.create_queue(QueueName=f"training-trigger-dlq-{error_code}")["QueueUrl"]
    invoker = AsyncInvoker(handler.lambda_handler, function_arn=_function_arn(account), sqs=sqs,
                           on_failure_queue_url=queue_url, retry_attempts=LAMBDA_ASYNC_RETRIES)
    queued_body = json.dumps(marker_event).encode()
    # When the event is invoked asynchronously, as EventBridge invokes the trigger
    outcome = invoker.invoke(queued_body)
    # Then every attempt failed with the capacity error and no job exists
    assert outcome.attempts == LAMBDA_ASYNC_RETRIES + 1 and outcome.destination_message_id
    assert all(error_code in error for error in outcome.errors), outcome.errors
    assert sagemaker.requests["CreateTrainingJob"] == (LAMBDA_ASYNC_RETRIES + 1) * ATTEMPTS_PER_INVOCATION
    assert _jobs(url) == []
    # And the dead-letter queue holds the event exactly as it was queued
    [message] = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1)["Messages"]
    record = json.loads(message["Body"])
    assert record["requestPayload"] == json.loads(queued_body)
    assert record["requestContext"]["condition"] == "RetriesExhausted"
    assert record["requestContext"]["approximateInvokeCount"] == LAMBDA_ASYNC_RETRIES + 1
    assert error_code in record["responsePayload"]["errorMessage"]
    # When capacity returns and the operator replays the dead letter's payload
    sagemaker.heal()
    replayed = handler.lambda_handler(record["requestPayload"], _context(account))
    sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
    # Then exactly one job runs, the one the original event named, and the queue is empty
    assert replayed["status"] == "started", replayed
    assert _jobs(url) == [replayed["job_name"]]
    assert "Messages" not in sqs.receive_message(QueueUrl=queue_url, WaitTimeSeconds=0)


def test_a_quota_error_is_rejected_at_once_with_sagemakers_message(faulty_sagemaker, backoff_waits, marker_event,
                                                                    account):
    # Given SageMaker answers CreateTrainingJob with a quota error, over HTTP as the service does
    sagemaker, url = faulty_sagemaker("ResourceLimitExceeded", None)
    # When the handler runs once
    result = handler.lambda_handler(marker_event, _context(account))
    # Then it asked once, waited for nothing, and returned the rejection carrying SageMaker's message: no retry
    # (the client's or Lambda's) sends that request again, and no job exists
    assert result["status"] == "rejected", result
    assert "ResourceLimitExceeded: The account-level service limit 'ml.m5.xlarge" in result["errors"][0]
    assert sagemaker.requests["CreateTrainingJob"] == 1 and backoff_waits == []
    assert _jobs(url) == []


def _function_arn(account: str) -> str:
    return f"arn:aws:lambda:{LOCAL_REGION}:{account}:function:training-trigger"


def _context(account: str) -> LambdaContext:
    return LambdaContext(invoked_function_arn=_function_arn(account))
