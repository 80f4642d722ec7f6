"""What SageMaker answers to CreateTrainingJob and CreateHyperParameterTuningJob decides the event's fate: an error
no retry can fix is a `rejected` result on the topic, carrying SageMaker's message, and the invocation does not
raise (Lambda would only send the same request again, then dead-letter it); throttling and server errors raise, so
Lambda's asynchronous retries run it again.

botocore Stubbers answer on the real clients; the SNS client's own hook records what is published.
"""

from __future__ import annotations

import json

import pytest
from botocore.exceptions import ClientError

from stubbed_clients import published
from trigger.sample_inputs import TOPIC_ARN, load_event
from trigger import test_handler as handled
from trigger.test_tuning import RANKER_TUNING

stack_environment = handled.stack_environment  # the handler tests' autouse fixture: the deployed stack's settings

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics:UserWarning")

# What SageMaker answers, as the service words it.
VALIDATION_MESSAGE = ("1 validation error detected: Value 'ml.p4d.24xlarge' at 'resourceConfig.instanceType' failed "
                      "to satisfy constraint: instance type not available in this region")
QUOTA_MESSAGE = ("The account-level service limit 'ml.g5.12xlarge for training job usage' is 0 Instances, with "
                 "current utilization of 0 Instances and a request delta of 2 Instances. Please use AWS Service "
                 "Quotas to request an increase for this quota.")
REFUSED = [("ValidationException", VALIDATION_MESSAGE), ("ResourceLimitExceeded", QUOTA_MESSAGE)]


def _training_job_event(s3_stub):
    handled._version_listing(s3_stub, {"_SUCCESS": handled.MARKER_ETAG})
    return "create_training_job", "CreateTrainingJob", load_event("s3_eventbridge_object_created.json")


def _tuning_job_event(s3_stub):
    handled._manifest_version(s3_stub, {"tuning": RANKER_TUNING})
    return "create_hyper_parameter_tuning_job", "CreateHyperParameterTuningJob", load_event("s3_notification_put.json")


JOBS = [_training_job_event, _tuning_job_event]


@pytest.mark.parametrize("job", JOBS, ids=["training", "tuning"])
@pytest.mark.parametrize(("code", "message"), REFUSED, ids=[code for code, _ in REFUSED])
def test_an_error_no_retry_can_fix_is_rejected_on_the_topic_with_sagemakers_message(job, code, message, s3_stub,
                                                                                    sagemaker_stub, sns_stub):
    # Given SageMaker refuses the job the event asks for
    method, operation, event = job(s3_stub)
    sagemaker_stub.add_client_error(method, service_error_code=code, service_message=message, http_status_code=400)
    handled._expect_rejection_notice(sns_stub)
    sent = published(sns_stub.client)
    # When the event is handled
    result = handled._invoke(event)
    # Then the invocation returns (no raise: Lambda does not send the same request again), rejected with SageMaker's
    # code and message and what to do
    assert result["status"] == "rejected", result
    [error] = result["errors"]
    assert error.startswith(f"SageMaker refused {operation} with {code}: {message} -- ")
    # And the topic hears it, with the event to send again once fixed
    [notice] = sent
    assert notice["TopicArn"] == TOPIC_ARN and notice["Subject"].startswith("Training job rejected: ranker-")
    assert json.loads(notice["Message"])["errors"] == [error]
    assert json.loads(notice["Message"])["event"] == event


@pytest.mark.parametrize("job", JOBS, ids=["training", "tuning"])
@pytest.mark.parametrize(("code", "status"), [("ThrottlingException", 400), ("InternalFailure", 500),
                                              ("ServiceUnavailable", 503)])
def test_throttling_and_server_errors_raise_so_the_invocation_is_retried(job, code, status, s3_stub, sagemaker_stub,
                                                                         sns_stub):
    # Given SageMaker answers with an error a later attempt may not meet (the client has retried it already)
    method, _, event = job(s3_stub)
    sagemaker_stub.add_client_error(method, service_error_code=code, http_status_code=status)
    # When the event is handled / Then the invocation fails with it, so Lambda's asynchronous retries run it again,
    # and nothing is published (the SNS Stubber has nothing queued)
    with pytest.raises(ClientError) as raised:
        handled._invoke(event)
    assert raised.value.response["Error"]["Code"] == code

