"""Settings shared by the trigger's unit tests: the stack's environment, sample events, stubbed AWS clients."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.stub import Stubber

# Powertools reads its service name and namespace when the trigger's modules are imported, before any fixture.
os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "training-trigger")
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "RankerTraining")
os.environ.setdefault("AWS_DEFAULT_REGION", "eu-west-1")

from training_trigger import aws_clients  # noqa: E402
from training_trigger.settings import Settings  # noqa: E402

from trigger.sample_inputs import stack_settings  # noqa: E402


@pytest.fixture
def settings() -> Settings:
    return stack_settings()


def _stubbed(client: Any) -> Iterator[Stubber]:
    with Stubber(client) as stubber:
        yield stubber
        stubber.assert_no_pending_responses()


@pytest.fixture
def sagemaker_stub() -> Iterator[Stubber]:
    yield from _stubbed(aws_clients.sagemaker_client())


@pytest.fixture
def s3_stub() -> Iterator[Stubber]:
    yield from _stubbed(aws_clients.s3_client())


@pytest.fixture
def sns_stub() -> Iterator[Stubber]:
    yield from _stubbed(aws_clients.sns_client())
