"""Duplicates: S3 and EventBridge deliver at least once, so one marker event may arrive ten times, one after the
other or all at once; exactly one training job must start, and the other nine report `duplicate`.

The job name is the idempotency key (dataset, version, marker ETag), and SageMaker's ResourceInUse is the lock:
proven against the local SageMaker endpoint over HTTP, which refuses a second job of one name as SageMaker does
(threads in one process, and ten Lambda execution environments as ten processes, for the concurrent cases). A new
marker object for the same version (a new ETag) is a new dataset event and starts a job of its own.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import handler
import pytest

from local_mode.aws.bucket_events import object_created_event
from local_mode.aws.local_clients import LOCAL_REGION, local_client
from local_mode.aws.trigger_invocation import invoke_trigger
from reliability.lambda_async import LambdaContext
from reliability.local_dataset import DATA_BUCKET, MARKER_KEY

DELIVERIES = 10
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


@pytest.mark.parametrize("concurrently", [False, True], ids=["sequential", "threads"])
def test_ten_deliveries_start_one_job_on_local_sagemaker(concurrently, local_sagemaker, point_trigger_at, marker_event,
                                                         account):
    # Given the trigger pointed at the local SageMaker endpoint
    point_trigger_at(local_sagemaker.url)
    # When the same marker event is delivered ten times, one after the other or all at once
    results = _deliver(DELIVERIES, lambda: handler.lambda_handler(marker_event, _context(account)),
                       concurrently=concurrently)
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
def rewritten_marker(moto, account: str) -> Iterator[dict[str, Any]]:
    """The version's marker written again with other content (a new ETag); the original is restored afterwards."""
    s3 = local_client("s3", moto.url)
    original = s3.get_object(Bucket=DATA_BUCKET, Key=MARKER_KEY)["Body"].read()
    s3.put_object(Bucket=DATA_BUCKET, Key=MARKER_KEY, Body=b"closed again after a fix to the train channel\n")
    try:
        yield object_created_event(s3, bucket=DATA_BUCKET, key=MARKER_KEY, account=account)
    finally:
        s3.put_object(Bucket=DATA_BUCKET, Key=MARKER_KEY, Body=original)


def test_a_new_marker_for_the_same_version_starts_a_second_job(local_sagemaker, point_trigger_at, marker_event,
                                                              rewritten_marker, account):
    # Given the trigger on the local SageMaker, and a job already started by the version's first marker
    point_trigger_at(local_sagemaker.url)
    first = handler.lambda_handler(marker_event, _context(account))
    # When the marker is written again (new ETag) and its event delivered twice
    second = [handler.lambda_handler(rewritten_marker, _context(account)) for _ in range(2)]
    # Then the new marker started one job of its own, and its second delivery was a duplicate of that job
    assert first["status"] == "started"
    assert [result["status"] for result in second] == ["started", "duplicate"]
    assert second[0]["job_name"] == second[1]["job_name"] != first["job_name"]
    assert sorted(_job_names(local_sagemaker.url)) == sorted([first["job_name"], second[0]["job_name"]])
