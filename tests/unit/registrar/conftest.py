"""The registrar's unit tests: Powertools reads its service name and namespace when the modules are imported."""

from __future__ import annotations

import io
import os
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber

os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "model-registration")
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "RankerTraining")
os.environ.setdefault("AWS_DEFAULT_REGION", "eu-west-1")

from model_registration.registry import Registry  # noqa: E402

from registrar.samples import load  # noqa: E402
from stubbed_clients import published, stubbed  # noqa: E402

JOB = "ranker-web-search-2026-11-01-2fc0bef5c3"
JOB_ARN = f"arn:aws:sagemaker:eu-west-1:123456789012:training-job/{JOB}"
ARTIFACT = f"s3://ranker-artifacts/models/{JOB}/output/model.tar.gz"
# What the project's entry points leave in model.tar.gz, in part: the weights and the serving handler beside them.
SERVABLE_MODEL = ("model.safetensors", "model_config.json", "code/inference.py", "code/ranker/__init__.py")


@dataclass
class Stubs:
    sagemaker: Stubber
    s3: Stubber
    sns: Stubber

    def registry(self) -> Registry:
        return Registry(sagemaker=self.sagemaker.client, s3=self.s3.client, sns=self.sns.client)

    def job_described(self) -> None:
        """DescribeTrainingJob and ListTags answer for the sample completed job."""
        self.sagemaker.add_response("describe_training_job", load("describe_training_job.json"),
                                    {"TrainingJobName": JOB})
        self.sagemaker.add_response("list_tags", load("training_job_tags.json"), {"ResourceArn": JOB_ARN})

    def artifact_holds(self, uri: str, members: tuple[str, ...]) -> None:
        """GetObject answers for the model.tar.gz at `uri` with a real gzipped tar of these members."""
        archive = io.BytesIO()
        with tarfile.open(fileobj=archive, mode="w:gz") as tar:
            for name in members:
                info = tarfile.TarInfo(name)
                info.size = len(name)
                tar.addfile(info, io.BytesIO(name.encode()))
        body = archive.getvalue()
        bucket, _, key = uri.removeprefix("s3://").partition("/")
        self.s3.add_response("get_object", {"Body": StreamingBody(io.BytesIO(body), len(body)),
                                            "ContentLength": len(body)}, {"Bucket": bucket, "Key": key})

    def published(self) -> list[dict]:
        """Every SNS message, read off the client's own hook."""
        return published(self.sns.client)


@pytest.fixture
def stubs() -> Iterator[Stubs]:
    with stubbed("sagemaker", "s3", "sns") as stubbers:
        yield Stubs(*stubbers)


