"""Runs SageMaker Python SDK v3's `ModelTrainer(...).train()` offline and prints what it sends: run by the side
environment's Python (.venv-sdk3), which holds v3; test_model_trainer_conformance.py starts it.

Reads a JSON list of jobs on stdin, each the arguments a user would give ModelTrainer, as plain JSON (`trainer`, the
constructor's; `metric_definitions`, `retry_attempts`, `tensorboard`, `infra_check`: its `with_*` methods';
`channels`), and prints, per job, the CreateTrainingJob request and the files it uploaded for each channel. Nothing
leaves the machine: the boto3 session has fake credentials, and a `before-send` hook answers every call as AWS would
for a principal that may do it (an S3 upload is kept, not sent) and stops at CreateTrainingJob, whose parameters a
`before-parameter-build` hook has read after botocore validated them.
"""

from __future__ import annotations

import base64
import json
import os
import sys
from typing import Any
from urllib.parse import unquote, urlparse

import boto3
from botocore.awsrequest import AWSResponse

os.environ["AWS_REQUEST_CHECKSUM_CALCULATION"] = "when_required"  # uploads as plain bodies, not aws-chunked

from sagemaker.core.helper.session_helper import Session  # noqa: E402
from sagemaker.core.shapes import MetricDefinition, S3DataSource, Tag  # noqa: E402
from sagemaker.train.configs import (  # noqa: E402
    CheckpointConfig,
    Compute,
    InputData,
    Networking,
    OutputDataConfig,
    RetryStrategy,
    SourceCode,
    StoppingCondition,
    TensorBoardOutputConfig,
)
from sagemaker.train.distributed import Torchrun  # noqa: E402
from sagemaker.train.model_trainer import ModelTrainer  # noqa: E402

REGION, ACCOUNT, STAGING_BUCKET = "eu-west-1", "123456789012", "sagemaker-staging-example"
_TRUST_POLICY = ('{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":'
                 '"sagemaker.amazonaws.com"},"Action":"sts:AssumeRole"}]}')
# The answers of the calls ModelTrainer makes before CreateTrainingJob (its staging bucket, its role checks).
_XML_ANSWERS = {
    "ListBuckets": f"<ListAllMyBucketsResult><Buckets><Bucket><Name>{STAGING_BUCKET}</Name><CreationDate>"
                   "2026-01-01T00:00:00.000Z</CreationDate></Bucket></Buckets><Owner><ID>x</ID></Owner>"
                   "</ListAllMyBucketsResult>",
    "GetCallerIdentity": f"<GetCallerIdentityResponse><GetCallerIdentityResult><Arn>arn:aws:iam::{ACCOUNT}:user/x"
                         f"</Arn><UserId>x</UserId><Account>{ACCOUNT}</Account></GetCallerIdentityResult>"
                         "</GetCallerIdentityResponse>",
    "GetRole": "<GetRoleResponse><GetRoleResult><Role><Path>/</Path><RoleName>r</RoleName><RoleId>AROAEXAMPLE</RoleId>"
               f"<Arn>arn:aws:iam::{ACCOUNT}:role/r</Arn><CreateDate>2026-01-01T00:00:00Z</CreateDate>"
               f"<AssumeRolePolicyDocument>{_TRUST_POLICY}</AssumeRolePolicyDocument></Role></GetRoleResult>"
               "</GetRoleResponse>",
    "SimulatePrincipalPolicy": "<SimulatePrincipalPolicyResponse><SimulatePrincipalPolicyResult><EvaluationResults>"
                               "<member><EvalActionName>s3:PutObject</EvalActionName><EvalDecision>allowed"
                               "</EvalDecision></member></EvaluationResults><IsTruncated>false</IsTruncated>"
                               "</SimulatePrincipalPolicyResult></SimulatePrincipalPolicyResponse>",
}


class _Body:
    def __init__(self, data: bytes):
        self.data = data

    def stream(self, **_: Any):
        yield self.data


class _Submitted(Exception):
    """CreateTrainingJob was about to go out: its parameters are recorded."""


class OfflineAws:
    """A boto3 session whose calls never leave the machine, with what they carried."""

    def __init__(self) -> None:
        self.session = boto3.Session(region_name=REGION, aws_access_key_id="testing",
                                     aws_secret_access_key="testing")
        self.request: dict[str, Any] = {}
        self.uploads: dict[str, bytes] = {}  # s3://bucket/key -> body
        self.session.events.register("before-parameter-build.sagemaker.CreateTrainingJob", self._record)
        self.session.events.register("before-send", self._answer)

    def _record(self, params: dict[str, Any], **_: Any) -> None:
        self.request = json.loads(json.dumps(params))

    def _answer(self, request: Any, event_name: str, **_: Any) -> AWSResponse:
        operation = event_name.rsplit(".", 1)[-1]
        if operation == "CreateTrainingJob":
            raise _Submitted()
        if operation == "PutObject":
            url = urlparse(request.url)
            bucket = url.hostname.split(".s3.")[0]
            body = request.body  # a file's part, as S3 transfers read it, or bytes
            self.uploads[f"s3://{bucket}/{unquote(url.path.lstrip('/'))}"] = (
                body.read() if hasattr(body, "read") else bytes(body or b""))
            return AWSResponse(request.url, 200, {"ETag": '"0"'}, _Body(b""))
        return AWSResponse(request.url, 200, {}, _Body(_XML_ANSWERS.get(operation, "").encode()))


def _trainer(job: dict[str, Any], session: Session) -> ModelTrainer:
    arguments = job["trainer"]
    trainer = ModelTrainer(
        training_image=arguments["training_image"],
        training_input_mode=arguments["training_input_mode"],
        source_code=SourceCode(**arguments["source_code"]),
        compute=Compute(**arguments["compute"]),
        networking=Networking(**arguments["networking"]) if arguments.get("networking") else None,
        stopping_condition=StoppingCondition(**arguments["stopping_condition"]),
        output_data_config=OutputDataConfig(**arguments["output_data_config"]),
        checkpoint_config=CheckpointConfig(**arguments["checkpoint_config"]),
        distributed=Torchrun() if arguments["torchrun"] else None,
        hyperparameters=arguments["hyperparameters"],
        environment=arguments["environment"],
        role=arguments["role"],
        tags=[Tag(key=key, value=value) for key, value in arguments["tags"].items()],
        base_job_name=arguments["base_job_name"],
        sagemaker_session=session,
    )
    trainer = trainer.with_metric_definitions([MetricDefinition(name=item["Name"], regex=item["Regex"])
                                               for item in job["metric_definitions"]])
    if job.get("retry_attempts"):
        trainer = trainer.with_retry_strategy(RetryStrategy(maximum_retry_attempts=job["retry_attempts"]))
    if job.get("tensorboard"):
        trainer = trainer.with_tensorboard_output_config(TensorBoardOutputConfig(**job["tensorboard"]))
    if job.get("infra_check"):
        trainer = trainer.with_infra_check_config()
    return trainer


def capture(job: dict[str, Any]) -> dict[str, Any]:
    """What `ModelTrainer(...).train(input_data_config=...)` sends for `job`."""
    aws = OfflineAws()
    session = Session(boto_session=aws.session, default_bucket=STAGING_BUCKET, sagemaker_config={
        "SchemaVersion": "1.0", "SageMaker": {"PythonSDK": {"Modules": {"TelemetryOptOut": True}}}})
    channels = [InputData(channel_name=name, data_source=S3DataSource(
        s3_data_type="S3Prefix", s3_uri=uri, s3_data_distribution_type=distribution))
        for name, uri, distribution in job["channels"]]
    try:
        _trainer(job, session).train(input_data_config=channels, wait=False, logs=False)
    except _Submitted:
        pass
    return {"request": aws.request,
            "uploads": {uri: base64.b64encode(body).decode() for uri, body in sorted(aws.uploads.items())}}


if __name__ == "__main__":
    json.dump([capture(job) for job in json.load(sys.stdin)], sys.stdout)
