"""The pure half: which completed jobs are registered, and the exact Model Registry requests."""

from __future__ import annotations

import math
import re

import botocore.session
import pytest
from botocore.validate import ParamValidator
from model_registration.registration import Refusal, Registration, model_package_group_name, plan_registration
from model_registration.settings import settings_from_environ
from training_trigger.overrides import TRIGGER_TAG_KEYS

from registrar.samples import INFERENCE_IMAGE_URI, load, stack_environ

GROUP_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")  # CreateModelPackageGroup's rule
SAGEMAKER = botocore.session.get_session().get_service_model("sagemaker")


def _tags(name: str = "training_job_tags.json") -> dict[str, str]:
    return {tag["Key"]: tag["Value"] for tag in load(name)["Tags"]}


def _plan(description=None, tags=None, **environ: str) -> Registration | Refusal:
    return plan_registration(description or load("describe_training_job.json"),
                             _tags() if tags is None else tags, settings_from_environ(stack_environ(**environ)))


def test_a_completed_dataset_job_becomes_a_pending_version_of_its_dataset_group():
    # Given a completed job the trigger started from dataset "web search", version 2026-11-01
    # When its registration is planned
    plan = _plan()
    # Then it goes into the dataset's group, pending approval, with the stack's inference image and the job's artifact
    assert isinstance(plan, Registration)
    request = plan.package_request
    assert plan.group_name == request["ModelPackageGroupName"] == "ranker-web-search"
    assert request["ModelApprovalStatus"] == "PendingManualApproval"
    container, = request["InferenceSpecification"]["Containers"]
    assert container["Image"] == INFERENCE_IMAGE_URI
    assert container["ModelDataUrl"] == (
        "s3://ranker-artifacts/models/ranker-web-search-2026-11-01-2fc0bef5c3/output/model.tar.gz")
    assert request["CustomerMetadataProperties"] == {"training-job": "ranker-web-search-2026-11-01-2fc0bef5c3",
                                                     "dataset": "web search", "dataset-version": "2026-11-01"}
    assert request["MetadataProperties"]["GeneratedBy"].endswith(":training-job/ranker-web-search-2026-11-01-2fc0bef5c3")


def test_the_quality_report_holds_the_final_model_metrics_and_sits_beside_the_artifact():
    # Given a job whose final metrics include progress counters (epoch, learning_rate) and evaluation results
    # When its registration is planned
    plan = _plan()
    # Then the report (which ModelQuality points at) holds the evaluation results only, at their final values
    assert plan.quality_report == {"ranking_metrics": {
        "train_loss": {"value": 0.41823}, "val_loss": {"value": 0.512}, "val_ndcg@10": {"value": 0.7712},
        "test_ndcg@10": {"value": 0.7534}}}
    uri = "s3://ranker-artifacts/models/ranker-web-search-2026-11-01-2fc0bef5c3/output/model_quality.json"
    assert plan.quality_report_uri == uri
    assert plan.package_request["ModelMetrics"] == {
        "ModelQuality": {"Statistics": {"ContentType": "application/json", "S3Uri": uri}}}


def test_the_package_request_passes_the_service_model():
    # Given the planned request  When botocore's validator checks it against CreateModelPackage's input shape
    request = _plan().package_request
    report = ParamValidator().validate(request, SAGEMAKER.operation_model("CreateModelPackage").input_shape)
    # Then it finds nothing; the idempotency token fits the field's own limits
    assert not report.has_errors(), report.generate_report()
    assert re.fullmatch(r"[a-zA-Z0-9-]{1,36}", request["ClientToken"])


def test_the_same_job_always_sends_the_same_client_token_and_another_job_another():
    # Given two plans for one job and one for another job
    description = load("describe_training_job.json")
    other = {**description, "TrainingJobArn": description["TrainingJobArn"] + "-b"}
    # Then a second delivery of one job's event cannot create a second version
    assert _plan().package_request["ClientToken"] == _plan().package_request["ClientToken"]
    assert _plan(other).package_request["ClientToken"] != _plan().package_request["ClientToken"]


@pytest.mark.parametrize(("minimum", "registered"), [("0.75", True), ("0.7534", True), ("0.76", False)])
def test_the_threshold_registers_models_at_or_above_it_only(minimum, registered):
    # Given a threshold on test_ndcg@10, which the job reports as 0.7534
    # When the registration is planned
    plan = _plan(THRESHOLD_METRIC="test_ndcg@10", THRESHOLD_MINIMUM=minimum)
    # Then only a model at or above the minimum is registered; a refusal names the metric, the value and the minimum
    assert isinstance(plan, Registration) is registered
    if not registered:
        assert plan.reason.startswith("test_ndcg@10=0.7534 is below the registration threshold 0.76")


def test_a_threshold_metric_the_job_did_not_report_refuses_registration():
    # Given a threshold on val_ndcg@5, which this job did not report
    plan = _plan(THRESHOLD_METRIC="val_ndcg@5", THRESHOLD_MINIMUM="0.1")
    # Then the model is not registered, and the reason lists what the job did report
    assert isinstance(plan, Refusal)
    assert "reported no val_ndcg@5" in plan.reason and "'test_ndcg@10'" in plan.reason


def test_a_nan_metric_never_passes_the_threshold():
    # Given a job whose test NDCG came out as NaN (every comparison with NaN is false)
    description = load("describe_training_job.json")
    description["FinalMetricDataList"] = [{"MetricName": "test_ndcg@10", "Value": math.nan,
                                           "Timestamp": "2026-11-01T06:11:00Z"}]
    # Then the threshold refuses it
    plan = _plan(description, THRESHOLD_METRIC="test_ndcg@10", THRESHOLD_MINIMUM="0.1")
    assert isinstance(plan, Refusal) and "test_ndcg@10=nan is below" in plan.reason


def test_a_job_started_with_explicit_channels_is_not_registered():
    # Given a manual job with explicit channels: the trigger tags it with its source only
    plan = _plan(tags={"trigger-source": "manual"})
    # Then it has no dataset group, and the reason says so
    assert isinstance(plan, Refusal) and "no 'dataset' tag" in plan.reason


@pytest.mark.parametrize(("dataset", "expected"), [
    ("web search", "ranker-web-search"),
    ("clicks_2026/eu.west", "ranker-clicks-2026-eu-west"),
    ("--x--", "ranker-x"),
])
def test_group_names_are_the_prefix_and_the_dataset_as_sagemaker_allows(dataset, expected):
    assert model_package_group_name("ranker", dataset) == expected


def test_a_long_dataset_name_is_cut_to_a_valid_group_name():
    name = model_package_group_name("ranker", "a" * 55 + "-" + "b" * 20)
    assert len(name) <= 63 and GROUP_NAME_PATTERN.fullmatch(name) and name.startswith("ranker-aaa")


def test_the_tags_read_are_the_ones_the_trigger_writes():
    # The registrar finds a job's dataset by the trigger's provenance tags: the keys must not drift apart.
    from model_registration.registration import DATASET_TAG, DATASET_VERSION_TAG

    assert {DATASET_TAG, DATASET_VERSION_TAG} <= set(TRIGGER_TAG_KEYS)


SERVER_ARN = "arn:aws:sagemaker:eu-west-1:123456789012:mlflow-tracking-server/ranking"


def test_a_tracked_jobs_package_names_its_mlflow_run():
    # Given a completed job that ran with MlflowConfig, and the run SageMaker reports for it
    description = {**load("describe_training_job.json"),
                   "MlflowConfig": {"MlflowResourceArn": SERVER_ARN, "MlflowExperimentName": "ranker-web search",
                                    "MlflowRunName": "ranker-web-search-2026-11-01-5d0c2e7f1a"},
                   "MlflowDetails": {"MlflowExperimentId": "4", "MlflowRunId": "8f2c61a0b7e94d3c9e1f2a3b4c5d6e7f"}}
    # When its registration is planned
    request = _plan(description).package_request
    # Then the package's metadata names the server, the experiment and the run, and the API model accepts it
    named = {key: value for key, value in request["CustomerMetadataProperties"].items() if key.startswith("mlflow-")}
    assert named == {"mlflow-resource-arn": SERVER_ARN, "mlflow-experiment": "ranker-web search",
                     "mlflow-experiment-id": "4", "mlflow-run-name": "ranker-web-search-2026-11-01-5d0c2e7f1a",
                     "mlflow-run-id": "8f2c61a0b7e94d3c9e1f2a3b4c5d6e7f"}
    report = ParamValidator().validate(request, SAGEMAKER.operation_model("CreateModelPackage").input_shape)
    assert not report.has_errors(), report.generate_report()


def test_a_tuning_trials_package_names_the_run_its_variables_pointed_at():
    # Given a trial (no MlflowConfig in a tuning job's definition) that got the trigger's MLflow variables
    description = {**load("describe_training_job.json"),
                   "Environment": {"MLFLOW_TRACKING_URI": SERVER_ARN, "MLFLOW_EXPERIMENT_NAME": "ranker-web search"}}
    metadata = _plan(description).package_request["CustomerMetadataProperties"]
    assert (metadata["mlflow-resource-arn"], metadata["mlflow-experiment"], metadata["mlflow-run-name"]) == (
        SERVER_ARN, "ranker-web search", description["TrainingJobName"])
    assert "mlflow-run-id" not in metadata


def test_an_untracked_job_names_no_run_and_a_value_the_registry_refuses_is_left_out():
    assert not any(key.startswith("mlflow-") for key in _plan().package_request["CustomerMetadataProperties"])
    own_server = {**load("describe_training_job.json"),
                  "Environment": {"MLFLOW_TRACKING_URI": "http://mlflow.internal:5000"}}
    assert not any(key.startswith("mlflow-") for key in _plan(own_server).package_request["CustomerMetadataProperties"])
    odd = {**load("describe_training_job.json"),
           "MlflowConfig": {"MlflowResourceArn": SERVER_ARN, "MlflowExperimentName": "web search (2026)"}}
    metadata = _plan(odd).package_request["CustomerMetadataProperties"]
    assert "mlflow-experiment" not in metadata and metadata["mlflow-resource-arn"] == SERVER_ARN
