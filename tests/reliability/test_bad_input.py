"""Bad input: generated malformed events and payloads each get a clear validation result (rejected or ignored, the
bad field named), never a CreateTrainingJob call, never an unhandled exception.

The trigger runs as its Lambda does (`handler.lambda_handler`, the stack's environment) against moto's S3 and SNS;
its real SageMaker client sits under a botocore Stubber with nothing queued, so any CreateTrainingJob fails the
example, and a hook on that client counts the calls that reached it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import handler
import pytest
from botocore.stub import Stubber
from hypothesis import HealthCheck, given, settings
from training_trigger import aws_clients

from local_mode.aws.local_clients import LOCAL_REGION, local_client
from local_mode.aws.moto_endpoint import MotoEndpoint
from reliability.lambda_async import LambdaContext
from reliability.local_dataset import DATA_BUCKET, MANIFEST_KEY
from reliability.malformed_inputs import (
    Malformed,
    guarded_payloads,
    manifests,
    manual_payloads,
    not_objects,
    s3_events,
)

NO_SAGEMAKER = "http://127.0.0.1:9"  # nothing listens: a call that escaped the Stubber would fail too
# The fixtures hold one trigger, one moto and one Stubber for all examples on purpose: an example leaves no state
# behind but the manifest, which the next manifest example overwrites. No example database in the repository.
EXAMPLES = settings(database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
# Ignored events publish no metric, which Powertools warns about: that is the expected outcome here.
pytestmark = pytest.mark.filterwarnings("ignore:No application metrics:UserWarning")


@pytest.fixture(scope="module")
def manifest_dataset(moto: MotoEndpoint) -> None:
    """A version with a train channel, closed by the manifest.json each manifest example writes."""
    local_client("s3", moto.url).put_object(Bucket=DATA_BUCKET, Key=MANIFEST_KEY.replace("manifest.json",
                                                                                          "train/rank.train"),
                                            Body=b"1 qid:1 1:0.5\n")


@pytest.fixture
def create_calls(point_trigger_at: Callable[[str], Any], manifest_dataset: None) -> Iterator[list[dict[str, Any]]]:
    """The CreateTrainingJob calls that reached the trigger's real client, which has no response to give."""
    point_trigger_at(NO_SAGEMAKER)
    client = aws_clients.sagemaker_client()
    calls: list[dict[str, Any]] = []
    record = lambda params, **_: calls.append(params)  # noqa: E731
    client.meta.events.register_first("provide-client-params.sagemaker.CreateTrainingJob", record)
    with Stubber(client):
        yield calls
    client.meta.events.unregister("provide-client-params.sagemaker.CreateTrainingJob", record)


def _handle(malformed: Malformed, moto: MotoEndpoint, account: str) -> dict[str, Any]:
    if malformed.manifest is not None:
        local_client("s3", moto.url).put_object(Bucket=DATA_BUCKET, Key=MANIFEST_KEY, Body=malformed.manifest)
    context = LambdaContext(invoked_function_arn=f"arn:aws:lambda:{LOCAL_REGION}:{account}:function:training-trigger")
    return handler.lambda_handler(malformed.event, context)


def _assert_refused_naming_the_field(result: dict[str, Any], malformed: Malformed) -> None:
    assert result["status"] in ("rejected", "ignored"), result
    explanation = " ".join(result.get("errors", [])) if result["status"] == "rejected" else result["reason"]
    assert malformed.names in explanation, f"{malformed.names!r} not named in {explanation!r}"


@pytest.fixture
def check(create_calls: list[dict[str, Any]], moto: MotoEndpoint, account: str) -> Callable[[Malformed], None]:
    def check_one(malformed: Malformed) -> None:
        # When the trigger handles the malformed input (an unhandled exception fails the example)
        result = _handle(malformed, moto, account)
        # Then it is refused, the bad field is named, and no job was asked for
        _assert_refused_naming_the_field(result, malformed)
        assert create_calls == []

    return check_one


@settings(EXAMPLES, max_examples=150)
@given(malformed=manual_payloads)
def test_malformed_manual_payloads_are_rejected_naming_the_field(check, malformed):
    check(malformed)


@settings(EXAMPLES, max_examples=100)
@given(malformed=guarded_payloads)
def test_payloads_aws_or_the_budget_would_refuse_are_rejected_before_any_call(check, malformed):
    check(malformed)


@settings(EXAMPLES, max_examples=100)
@given(malformed=s3_events)
def test_malformed_s3_events_are_refused_naming_the_field(check, malformed):
    check(malformed)


@settings(EXAMPLES, max_examples=60)
@given(malformed=manifests)
def test_malformed_manifests_are_rejected_naming_the_field(check, malformed):
    check(malformed)


@settings(EXAMPLES, max_examples=30)
@given(malformed=not_objects)
def test_events_that_are_not_objects_are_rejected(check, malformed):
    check(malformed)
