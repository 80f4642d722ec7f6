"""The handler end to end on real botocore clients under Stubbers: every call is checked against the service model,
and a call a test did not expect fails it (that is how "never registers" is proven)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from botocore.stub import ANY
from model_registration import service
from model_registration.settings import settings_from_environ

from registrar.conftest import ARTIFACT, JOB, SERVABLE_MODEL
from registrar.samples import TOPIC_ARN, load, stack_environ

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics:UserWarning")

GROUP = "ranker-web-search"
PACKAGE_ARN = f"arn:aws:sagemaker:eu-west-1:123456789012:model-package/{GROUP}/3"
REPORT_KEY = f"models/{JOB}/output/model_quality.json"
HANDLER_FILE = Path(__file__).resolve().parents[3] / "lambda" / "registrar" / "handler.py"


def test_a_completed_job_is_registered_in_a_new_group_with_its_quality_report(stubs):
    # Given a completed project job from dataset "web search", whose group does not exist yet
    stubs.job_described()
    stubs.artifact_holds(ARTIFACT, SERVABLE_MODEL)
    stubs.sagemaker.add_client_error(
        "describe_model_package_group", "ValidationException",
        f"ModelPackageGroup arn:aws:sagemaker:eu-west-1:123456789012:model-package-group/{GROUP} does not exist.",
        expected_params={"ModelPackageGroupName": GROUP})
    stubs.sagemaker.add_response("create_model_package_group", {"ModelPackageGroupArn": f"arn:{GROUP}"},
                                 {"ModelPackageGroupName": GROUP, "ModelPackageGroupDescription": ANY})
    stubs.s3.add_response("put_object", {}, {"Bucket": "ranker-artifacts", "Key": REPORT_KEY, "Body": ANY,
                                             "ContentType": "application/json"})
    stubs.sagemaker.add_response("create_model_package", {"ModelPackageArn": PACKAGE_ARN},
                                 {**dict.fromkeys(("ModelPackageDescription", "InferenceSpecification",
                                                   "MetadataProperties", "CustomerMetadataProperties",
                                                   "ClientToken"), ANY),
                                  "ModelPackageGroupName": GROUP, "ModelApprovalStatus": "PendingManualApproval",
                                  "ModelMetrics": {"ModelQuality": {"Statistics": {
                                      "ContentType": "application/json",
                                      "S3Uri": f"s3://ranker-artifacts/{REPORT_KEY}"}}}})
    stubs.sns.add_response("publish", {"MessageId": "1"}, {"TopicArn": TOPIC_ARN, "Subject": ANY, "Message": ANY})
    sent = stubs.published()
    # When its state change event arrives
    result = service.handle_event(load("training_job_completed.json"), settings_from_environ(stack_environ()),
                                  stubs.registry())
    # Then the group is created, the package registered pending approval, and the team told its ARN and metrics
    assert result["status"] == "registered" and result["model_package_arn"] == PACKAGE_ARN
    assert result["metrics"]["test_ndcg@10"] == 0.7534
    message = json.loads(sent[0]["Message"])
    assert message["model_package_arn"] == PACKAGE_ARN and message["model_approval_status"] == "PendingManualApproval"
    assert sent[0]["Subject"] == f"Model registered, pending approval: {GROUP}"


def test_an_existing_group_is_reused(stubs):
    # Given a dataset whose group exists: DescribeModelPackageGroup answers, so no CreateModelPackageGroup follows
    stubs.job_described()
    stubs.artifact_holds(ARTIFACT, SERVABLE_MODEL)
    stubs.sagemaker.add_response("describe_model_package_group", {
        "ModelPackageGroupName": GROUP, "ModelPackageGroupArn": f"arn:{GROUP}", "CreationTime": "2026-10-01T00:00:00Z",
        "CreatedBy": {}, "ModelPackageGroupStatus": "Completed"}, {"ModelPackageGroupName": GROUP})
    stubs.s3.add_response("put_object", {}, None)
    stubs.sagemaker.add_response("create_model_package", {"ModelPackageArn": PACKAGE_ARN}, None)
    stubs.sns.add_response("publish", {"MessageId": "1"}, None)
    result = service.handle_event(load("training_job_completed.json"), settings_from_environ(stack_environ()),
                                  stubs.registry())
    assert result["status"] == "registered"


def test_a_model_below_the_threshold_is_not_registered_and_the_notification_says_why(stubs):
    # Given a threshold above the job's test_ndcg@10 (0.7534)
    stubs.job_described()
    stubs.sns.add_response("publish", {"MessageId": "1"}, None)
    sent = stubs.published()
    settings = settings_from_environ(stack_environ(THRESHOLD_METRIC="test_ndcg@10", THRESHOLD_MINIMUM="0.8"))
    # When its completed event arrives
    result = service.handle_event(load("training_job_completed.json"), settings, stubs.registry())
    # Then no registry call is made (any would fail the Stubber) and the message carries the reason
    assert result["status"] == "refused"
    assert sent[0]["Subject"] == f"Model not registered: {JOB}"
    assert "test_ndcg@10=0.7534 is below the registration threshold 0.8" in json.loads(sent[0]["Message"])["reason"]


def test_a_model_without_its_serving_handler_is_not_registered_and_the_notification_says_why(stubs):
    # Given a completed job whose model.tar.gz holds its weights but no code/inference.py (a script of the user's own
    # that saves its model only)
    stubs.job_described()
    stubs.artifact_holds(ARTIFACT, ("model.pt",))
    stubs.sns.add_response("publish", {"MessageId": "1"}, None)
    sent = stubs.published()
    # When its completed event arrives
    result = service.handle_event(load("training_job_completed.json"), settings_from_environ(stack_environ()),
                                  stubs.registry())
    # Then no package group or package is created (any such call would fail the Stubber), and the notification names
    # the missing handler and where the script must write it
    assert result["status"] == "refused"
    assert sent[0]["Subject"] == f"Model not registered: {JOB}"
    reason = json.loads(sent[0]["Message"])["reason"]
    assert f"{ARTIFACT} holds no code/inference.py" in reason
    assert "have the training script write its handler to $SM_MODEL_DIR/code/inference.py" in reason


@pytest.mark.parametrize("seconds_left", [service.RESERVE_SECONDS + 30, service.RESERVE_SECONDS])
def test_an_archive_unread_by_the_timeout_is_registered_saying_its_handler_went_unchecked(stubs, seconds_left):
    # Given a completed job whose model.tar.gz lacks the handler, with time enough to read it or none left to read
    stubs.job_described()
    stubs.artifact_holds(ARTIFACT, ("model.pt",))
    if seconds_left == service.RESERVE_SECONDS:
        stubs.sagemaker.add_response("describe_model_package_group", {
            "ModelPackageGroupName": GROUP, "ModelPackageGroupArn": f"arn:{GROUP}",
            "CreationTime": "2026-10-01T00:00:00Z", "CreatedBy": {}, "ModelPackageGroupStatus": "Completed"}, None)
        stubs.s3.add_response("put_object", {}, None)
        stubs.sagemaker.add_response("create_model_package", {"ModelPackageArn": PACKAGE_ARN}, None)
    stubs.sns.add_response("publish", {"MessageId": "1"}, None)
    sent = stubs.published()
    # When its event arrives with that much of the function's time left
    result = service.handle_event(load("training_job_completed.json"), settings_from_environ(stack_environ()),
                                  stubs.registry(), remaining_seconds=lambda: seconds_left)
    message = json.loads(sent[0]["Message"])
    if seconds_left > service.RESERVE_SECONDS:
        # Then the archive read to its end refuses the model
        assert result["status"] == "refused" and "holds no code/inference.py" in message["reason"]
    else:
        # Then a read stopped by the deadline registers it, and the team is told the handler went unchecked
        assert result["status"] == "registered"
        assert f"{ARTIFACT} was too large to read for code/inference.py before the function's timeout" in (
            message["note"])


def test_a_failed_job_is_ignored_without_any_call(stubs):
    result = service.handle_event(load("training_job_failed.json"), settings_from_environ(stack_environ()),
                                  stubs.registry())
    assert result["status"] == "ignored" and "TrainingJobStatus='Failed'" in result["reason"]


def test_a_job_of_another_project_is_ignored(stubs):
    event = load("training_job_completed.json")
    event["detail"]["TrainingJobName"] = "other-team-job-1"
    result = service.handle_event(event, settings_from_environ(stack_environ()), stubs.registry())
    assert result["status"] == "ignored"


def test_the_handler_reads_the_environment_and_returns_the_result(monkeypatch):
    # Given the stack's environment and the handler module as the runtime loads it (`handler.lambda_handler`)
    for name, value in stack_environ().items():
        monkeypatch.setenv(name, value)
    spec = importlib.util.spec_from_file_location("registrar_handler", HANDLER_FILE)
    handler = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(handler)
    service.load_settings.cache_clear()
    context = type("Context", (), {"function_name": "registrar", "memory_limit_in_mb": 256,
                                   "invoked_function_arn": "arn:aws:lambda:eu-west-1:123456789012:function:r",
                                   "aws_request_id": "1", "get_remaining_time_in_millis": lambda self: 60_000})()
    # When a failed job's event arrives Then it answers without touching AWS
    assert handler.lambda_handler(load("training_job_failed.json"), context)["status"] == "ignored"
    service.load_settings.cache_clear()
