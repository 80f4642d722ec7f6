"""The trigger against a local AWS endpoint: moto's server over HTTP on 127.0.0.1.

A real dataset version is uploaded, the EventBridge "Object Created" event is built from the stored marker's real
ETag and size, and the handler runs in a fresh interpreter (as a Lambda cold start would) with
AWS_ENDPOINT_URL_<SERVICE> pointing at the server. The job must then be recorded in moto's SageMaker.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import boto3
import pytest
from moto.server import ThreadedMotoServer

PROJECT_ROOT = Path(__file__).resolve().parents[2]
SAMPLE_EVENT = PROJECT_ROOT / "tests" / "unit" / "trigger" / "events" / "s3_eventbridge_object_created.json"
sys.path.insert(0, str(PROJECT_ROOT / "tests" / "unit"))
from trigger.sample_inputs import write_stack_settings  # noqa: E402

pytestmark = pytest.mark.slow  # a moto server and a fresh interpreter: seconds

REGION = "eu-west-1"
DATA_BUCKET = "ranker-data-example"
VERSION_ROOT = "datasets/web search/2026-11-01/"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": REGION}
# The handler runs in a child interpreter: it imports as the Lambda runtime would, with the stack's environment.
RUN_HANDLER = """
import json, sys, types
import handler
context = types.SimpleNamespace(function_name="ranker-training-trigger", memory_limit_in_mb=256,
    invoked_function_arn="arn:aws:lambda:eu-west-1:123456789012:function:ranker-training-trigger",
    aws_request_id="0f6f7f7e-2d2a-4a1e-9d59-6d0a4c3f2b11")
result = handler.lambda_handler(json.load(sys.stdin), context)
print("RESULT " + json.dumps(result))
"""


@pytest.fixture(scope="module")
def endpoint():
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


def _client(service: str, endpoint: str):
    return boto3.client(service, endpoint_url=endpoint, region_name=REGION,
                        aws_access_key_id="testing", aws_secret_access_key="testing")


def _run_handler(event: dict, environ: dict[str, str]) -> dict:
    completed = subprocess.run([sys.executable, "-c", RUN_HANDLER], input=json.dumps(event), text=True,
                               capture_output=True, env=environ, cwd=PROJECT_ROOT / "lambda" / "trigger", timeout=120)
    assert completed.returncode == 0, completed.stderr
    [line] = [line for line in completed.stdout.splitlines() if line.startswith("RESULT ")]
    return json.loads(line.removeprefix("RESULT "))


def test_marker_upload_starts_a_job_recorded_by_sagemaker(endpoint, tmp_path):
    # Given a dataset version uploaded to the data bucket, closed by its marker
    s3 = _client("s3", endpoint)
    s3.create_bucket(Bucket=DATA_BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})
    for channel in ("train", "validation"):
        s3.put_object(Bucket=DATA_BUCKET, Key=f"{VERSION_ROOT}{channel}/rank.{channel}",
                      Body=b"2 qid:1 1:0.5 2:0.1\n0 qid:1 1:0.2 2:0.9\n")
    s3.put_object(Bucket=DATA_BUCKET, Key=f"{VERSION_ROOT}_SUCCESS", Body=b"")
    stored = s3.head_object(Bucket=DATA_BUCKET, Key=f"{VERSION_ROOT}_SUCCESS")
    topic_arn = _client("sns", endpoint).create_topic(Name="ranker-training-rejections")["TopicArn"]
    # And the EventBridge event S3 sends for it, carrying the stored object's ETag and size, key URL-encoded
    event = json.loads(SAMPLE_EVENT.read_text())
    event["detail"]["object"].update(key="datasets/web+search/2026-11-01/_SUCCESS", etag=stored["ETag"].strip('"'),
                                     size=stored["ContentLength"])
    environ = {**os.environ, **write_stack_settings(tmp_path), "NOTIFICATION_TOPIC_ARN": topic_arn, **CREDENTIALS,
               "AWS_ENDPOINT_URL_S3": endpoint, "AWS_ENDPOINT_URL_SAGEMAKER": endpoint,
               "AWS_ENDPOINT_URL_SNS": endpoint, "PYTHONPATH": str(PROJECT_ROOT / "lambda" / "trigger")}
    # When the handler receives the event
    result = _run_handler(event, environ)
    # Then the job is started and SageMaker records it with the version's channels and the marker's ETag
    assert result["status"] == "started", result
    job = _client("sagemaker", endpoint).describe_training_job(TrainingJobName=result["job_name"])
    channels = {c["ChannelName"]: c["DataSource"]["S3DataSource"]["S3Uri"] for c in job["InputDataConfig"]}
    assert channels == {name: f"s3://{DATA_BUCKET}/{VERSION_ROOT}{name}/" for name in ("train", "validation")}
    assert json.loads(job["HyperParameters"]["sagemaker_job_name"]) == result["job_name"]
    tags = _client("sagemaker", endpoint).list_tags(ResourceArn=job["TrainingJobArn"])["Tags"]
    assert {"Key": "marker-etag", "Value": stored["ETag"].strip('"')} in tags
