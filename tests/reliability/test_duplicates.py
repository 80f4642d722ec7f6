"""Duplicates: S3 and EventBridge deliver at least once, so one marker event may arrive ten times, one after the
other or all at once; exactly one training job must start, and the other nine report `duplicate`.

The job name is the idempotency key (dataset, version, marker ETag), and SageMaker's ResourceInUse is the lock:
proven against the local SageMaker endpoint over HTTP (ten Lambda execution environments as ten processes for the
concurrent case) and with a botocore Stubber on the trigger's real client.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from botocore.stub import Stubber

import handler
from local_mode.local_clients import LOCAL_REGION, local_client
from local_mode.trigger_invocation import invoke_trigger
from reliability.lambda_async import LambdaContext
from training_trigger import aws_clients

DELIVERIES = 10
# The Stubber answers every call itself; nothing listens here, so a call that escaped it would fail.
NO_SAGEMAKER = "http://127.0.0.1:9"
# Threads share the process's one Powertools Metrics object, so one invocation may flush another's count and find
# none of its own; a Lambda execution environment never runs two invocations at once.
pytestmark = pytest.mark.filterwarnings("ignore:No application metrics:UserWarning")


def _context(account: str) -> LambdaContext:
    return LambdaContext(invoked_function_arn=f"arn:aws:lambda:{LOCAL_REGION}:{account}:function:training-trigger")


def _deliver(times: int, deliver_once: Callable[[], dict[str, Any]], *, concurrently: bool) -> list[dict[str, Any]]:
    if not concurrently:
        return [deliver_once() for _ in range(times)]
    with ThreadPoolExecutor(max_workers=times) as pool:
        return list(pool.map(lambda _: deliver_once(), range(times)))


def _assert_one_started_rest_duplicate(results: list[dict[str, Any]]) -> str:
    statuses = Counter(result["status"] for result in results)
    assert statuses == {"started": 1, "duplicate": DELIVERIES - 1}, results
    [job_name] = {result["job_name"] for result in results}
    return job_name


def _job_names(sagemaker_url: str) -> list[str]:
    summaries = local_client("sagemaker", sagemaker_url).list_training_jobs()["TrainingJobSummaries"]
    return [summary["TrainingJobName"] for summary in summaries]


def test_ten_sequential_deliveries_start_one_job_on_local_sagemaker(local_sagemaker, point_trigger_at, marker_event,
                                                                   account):
    # Given the trigger pointed at the local SageMaker endpoint
    point_trigger_at(local_sagemaker.url)
    # When the same marker event is delivered ten times, one after the other
    results = _deliver(DELIVERIES, lambda: handler.lambda_handler(marker_event, _context(account)),
                       concurrently=False)
    # Then one delivery started the job, nine were duplicates, and SageMaker holds exactly that one job
    job_name = _assert_one_started_rest_duplicate(results)
    assert _job_names(local_sagemaker.url) == [job_name]


@pytest.mark.slow  # ten fresh interpreters, as ten Lambda execution environments: a few seconds
def test_ten_concurrent_deliveries_start_one_job_on_local_sagemaker(local_sagemaker, point_trigger_at, marker_event,
                                                                   moto, account):
    # Given the stack's environment for the trigger on the local endpoints
    environment = point_trigger_at(local_sagemaker.url)

    def deliver_once() -> dict[str, Any]:
        return invoke_trigger(marker_event, account=account, function_environment=environment, s3_url=moto.url,
                              sns_url=moto.url, sagemaker_url=local_sagemaker.url)

    # When ten execution environments handle the same marker event at the same time
    results = _deliver(DELIVERIES, deliver_once, concurrently=True)
    # Then exactly one job exists
    job_name = _assert_one_started_rest_duplicate(results)
    assert _job_names(local_sagemaker.url) == [job_name]


@pytest.fixture
def sagemaker_stub(point_trigger_at: Callable[[str], Any]) -> Iterator[Stubber]:
    """The trigger's real SageMaker client under a Stubber: SageMaker accepts the first name, then ResourceInUse."""
    point_trigger_at(NO_SAGEMAKER)
    with Stubber(aws_clients.sagemaker_client()) as stubber:
        stubber.add_response("create_training_job", {
            "TrainingJobArn": f"arn:aws:sagemaker:{LOCAL_REGION}:123456789012:training-job/ranker-web-search"})
        for _ in range(DELIVERIES - 1):
            stubber.add_client_error("create_training_job", service_error_code="ResourceInUse", http_status_code=400,
                                     service_message="Training job names must be unique within an AWS account and "
                                                     "region, and a training job with this name already exists")
        yield stubber
        stubber.assert_no_pending_responses()


@pytest.mark.parametrize("concurrently", [False, True], ids=["sequential", "threads"])
def test_ten_deliveries_give_one_started_nine_duplicates_with_stubber(concurrently, sagemaker_stub, marker_event,
                                                                      account):
    # When the same marker event is delivered ten times
    results = _deliver(DELIVERIES, lambda: handler.lambda_handler(marker_event, _context(account)),
                       concurrently=concurrently)
    # Then one started, nine duplicates, all naming the same job (the Stubber checks all ten calls were made)
    _assert_one_started_rest_duplicate(results)
