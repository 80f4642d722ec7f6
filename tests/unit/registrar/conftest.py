"""The registrar's unit tests: Powertools reads its service name and namespace when the modules are imported."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from botocore.stub import Stubber

os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "model-registration")
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "RankerTraining")
os.environ.setdefault("AWS_DEFAULT_REGION", "eu-west-1")

from model_registration.registry import Registry  # noqa: E402

from registrar.samples import load  # noqa: E402
from stubbed_clients import published, stubbed  # noqa: E402

JOB = "ranker-web-search-2026-11-01-2fc0bef5c3"
JOB_ARN = f"arn:aws:sagemaker:eu-west-1:123456789012:training-job/{JOB}"


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

    def published(self) -> list[dict]:
        """Every SNS message, read off the client's own hook."""
        return published(self.sns.client)


@pytest.fixture
def stubs() -> Iterator[Stubs]:
    with stubbed("sagemaker", "s3", "sns") as stubbers:
        yield Stubs(*stubbers)


