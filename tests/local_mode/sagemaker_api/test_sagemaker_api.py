"""The local SageMaker endpoint through a real boto3 client over HTTP: the service's answers where they matter."""

from __future__ import annotations

import io
import json
import tarfile
import time

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from botocore.validate import ParamValidator

from local_mode.aws.local_clients import DUMMY_CREDENTIALS, LOCAL_REGION
from local_mode.sagemaker_api.request_validation import operation_model
from local_mode.aws.s3_transfer import split_s3_uri

pytestmark = pytest.mark.slow


def read_tar_member(s3, uri: str, member: str) -> bytes:
    bucket, key = split_s3_uri(uri)
    archive = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        return tar.extractfile(member).read()


def test_a_completed_job_reports_statuses_metrics_and_artifacts(sagemaker, s3, training_request, wait_for_end):
    # Given a job whose script prints three epochs of metrics and writes a model
    request = training_request("api-complete", "write_model.py")

    # When it is created and runs to the end
    arn = sagemaker.create_training_job(**request)["TrainingJobArn"]
    description = wait_for_end("api-complete")

    # Then it completed through the service's secondary statuses
    assert arn.endswith(":training-job/api-complete")
    assert description["TrainingJobStatus"] == "Completed"
    steps = [transition["Status"] for transition in description["SecondaryStatusTransitions"]]
    assert steps == ["Starting", "Downloading", "Training", "Uploading", "Completed"]
    assert all("EndTime" in transition for transition in description["SecondaryStatusTransitions"])
    # And the final metrics are the last values the request's regexes captured
    metrics = {metric["MetricName"]: metric["Value"] for metric in description["FinalMetricDataList"]}
    assert metrics == {"epoch": 3.0, "train_loss": pytest.approx(1 / 3, abs=1e-4), "val_ndcg@10": 0.8}
    # And the model went to <S3OutputPath>/<job>/output/model.tar.gz with what the script saw
    assert description["ModelArtifacts"]["S3ModelArtifacts"] == (
        "s3://local-mode-test-artifacts/models/api-complete/output/model.tar.gz")
    model = json.loads(read_tar_member(s3, description["ModelArtifacts"]["S3ModelArtifacts"], "model.json"))
    assert model["train_files"] == ["part-0.txt", "part-1.txt", "part-2.txt"]
    assert (model["epochs"], model["loss"], model["hosts"]) == (3, "listnet", ["algo-1"])
    assert model["user_args"] == ["--epochs", "3", "--loss", "listnet"]
    output_uri = description["ModelArtifacts"]["S3ModelArtifacts"].replace("model.tar.gz", "output.tar.gz")
    assert read_tar_member(s3, output_uri, "curves.txt") == b"curve"


def test_describe_answers_in_the_shape_of_the_service_model(sagemaker, training_request, wait_for_end):
    # Given a finished job
    sagemaker.create_training_job(**training_request("api-shape", "write_model.py"))
    wait_for_end("api-shape")

    # When the raw response is checked against the model's output shape
    description = sagemaker.describe_training_job(TrainingJobName="api-shape")
    description.pop("ResponseMetadata")
    report = ParamValidator().validate(description, operation_model("DescribeTrainingJob").output_shape)

    # Then it breaks no constraint
    assert not report.has_errors(), report.generate_report()


def test_a_duplicate_name_is_resource_in_use(sagemaker, training_request, wait_for_end):
    # Given a job that exists
    request = training_request("api-duplicate", "write_model.py")
    sagemaker.create_training_job(**request)

    # When the same name is created again
    with pytest.raises(ClientError) as raised:
        sagemaker.create_training_job(**request)

    # Then the service's error comes back and only one job exists
    assert raised.value.response["Error"]["Code"] == "ResourceInUse"
    assert [job["TrainingJobName"] for job in sagemaker.list_training_jobs()["TrainingJobSummaries"]] == [
        "api-duplicate"]
    wait_for_end("api-duplicate")


@pytest.mark.parametrize(("field", "mutate"), [
    ("TrainingJobName", lambda request: request.update(TrainingJobName="bad_name!")),
    ("InstanceCount", lambda request: request["ResourceConfig"].update(InstanceCount=0)),
    ("TrainingInputMode", lambda request: request["AlgorithmSpecification"].update(TrainingInputMode="Stream")),
    ("RoleArn", lambda request: request.pop("RoleArn")),
    # a tracking server this endpoint does not run (here, none: local mode runs one only with tracking on)
    ("MlflowConfig.MlflowResourceArn", lambda request: request.update(MlflowConfig={
        "MlflowResourceArn": "arn:aws:sagemaker:us-east-1:123456789012:mlflow-tracking-server/ranking"})),
])
def test_invalid_requests_are_validation_exceptions(sagemaker, local_sagemaker, training_request, field, mutate):
    # Given a request broken in one field, sent by a client whose own checks are off
    request = training_request("api-invalid", "write_model.py")
    mutate(request)
    unchecked = boto3.client("sagemaker", endpoint_url=local_sagemaker.url, region_name=LOCAL_REGION,
                             config=Config(parameter_validation=False), **DUMMY_CREDENTIALS)

    # When it is created
    with pytest.raises(ClientError) as raised:
        unchecked.create_training_job(**request)

    # Then the service answers ValidationException naming the field, and no job exists
    assert raised.value.response["Error"]["Code"] == "ValidationException"
    assert field in raised.value.response["Error"]["Message"]
    assert sagemaker.list_training_jobs()["TrainingJobSummaries"] == []


def test_a_jobs_tags_are_the_ones_it_was_created_with(sagemaker, training_request, wait_for_end):
    # Given a job created with tags (DescribeTrainingJob leaves them out)
    request = training_request("api-tags", "write_model.py")
    request["Tags"] = [{"Key": "dataset", "Value": "web search"}, {"Key": "dataset-version", "Value": "v1"}]
    arn = sagemaker.create_training_job(**request)["TrainingJobArn"]
    wait_for_end("api-tags")
    # When ListTags asks for them by the job's ARN Then they come back as created
    assert sagemaker.list_tags(ResourceArn=arn)["Tags"] == request["Tags"]
    with pytest.raises(ClientError) as raised:
        sagemaker.list_tags(ResourceArn=arn + "-unknown")
    assert raised.value.response["Error"]["Code"] == "ValidationException"


def test_model_registry_calls_are_answered_by_moto_after_the_services_checks(sagemaker, local_sagemaker):
    # Given a package group created through the local endpoint
    sagemaker.create_model_package_group(ModelPackageGroupName="api-registry")
    arn = sagemaker.create_model_package(
        ModelPackageGroupName="api-registry", ModelApprovalStatus="PendingManualApproval",
        InferenceSpecification={"Containers": [{"Image": "example.com/image:1", "ModelDataUrl": "s3://b/m.tar.gz"}]},
    )["ModelPackageArn"]
    # Then moto holds the version, and reads it back
    assert sagemaker.describe_model_package(ModelPackageName=arn)["ModelApprovalStatus"] == "PendingManualApproval"
    # And a name the service's model forbids is refused before moto, which would take it, sees it
    unchecked = boto3.client("sagemaker", endpoint_url=local_sagemaker.url, region_name=LOCAL_REGION,
                             config=Config(parameter_validation=False), **DUMMY_CREDENTIALS)
    with pytest.raises(ClientError) as raised:
        unchecked.create_model_package_group(ModelPackageGroupName="web search")
    assert raised.value.response["Error"]["Code"] == "ValidationException"
    assert "ModelPackageGroupName" in raised.value.response["Error"]["Message"]


def test_an_unknown_job_is_not_found(sagemaker):
    with pytest.raises(ClientError) as raised:
        sagemaker.describe_training_job(TrainingJobName="no-such-job")
    assert raised.value.response["Error"]["Code"] == "ValidationException"
    assert "not found" in raised.value.response["Error"]["Message"]


def test_a_failing_script_fails_the_job_with_its_error(sagemaker, training_request, wait_for_end):
    # Given a script that raises
    sagemaker.create_training_job(**training_request("api-fail", "fail.py"))

    # When it runs
    description = wait_for_end("api-fail")

    # Then the job failed with the algorithm's error as its reason, and no model was uploaded
    assert description["TrainingJobStatus"] == "Failed"
    assert description["SecondaryStatus"] == "Failed"
    assert description["FailureReason"].startswith("AlgorithmError: ")
    assert "ExitCode 1" in description["FailureReason"]
    assert "rank.train line 7" in description["FailureReason"]
    assert description["ModelArtifacts"]["S3ModelArtifacts"] == ""


def test_the_reason_of_a_failed_multi_host_job_is_the_error_of_the_host_that_failed(sagemaker, training_request,
                                                                                   wait_for_end):
    # Given two hosts where algo-2 raises and algo-1, stopped because of it, logs an error line of its own last
    sagemaker.create_training_job(**training_request("api-fail-host", "fail_on_last_host.py", instance_count=2))

    # When it runs
    description = wait_for_end("api-fail-host")

    # Then the reason is algo-2's error, not the stop that followed it on algo-1
    assert description["TrainingJobStatus"] == "Failed"
    assert "rank.train line 9 on the last host" in description["FailureReason"]
    assert "SignalException" not in description["FailureReason"]


def test_a_channel_without_objects_fails_with_a_client_error(sagemaker, training_request, wait_for_end):
    # Given a channel pointing at an empty prefix
    request = training_request("api-empty", "write_model.py")
    request["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3Uri"] = "s3://local-mode-test-data/nothing/"
    sagemaker.create_training_job(**request)

    # When it runs, Then it fails before training, naming the URI
    description = wait_for_end("api-empty")
    assert description["TrainingJobStatus"] == "Failed"
    assert description["FailureReason"].startswith("ClientError: No S3 objects found")
    assert "s3://local-mode-test-data/nothing/" in description["FailureReason"]


# A CDK file asset's key: the bundle's hash and its last extension, as `cdk deploy` publishes sourcedir.tar.gz.
ASSET_KEY = "3cf947b5f815f5fad58d4a786b91e938662d41031be8431a86650f225d1b6150.gz"


def _isolated_request(training_request, s3, name: str, submit_directory: str) -> dict:
    """A job whose code arrives as the `code` channel, from the bundle published under an asset-shaped key."""
    bundle = s3.get_object(Bucket="local-mode-test-artifacts", Key="code/sourcedir.tar.gz")["Body"].read()
    s3.put_object(Bucket="local-mode-test-artifacts", Key=ASSET_KEY, Body=bundle)
    request = training_request(name, "write_model.py")
    request["EnableNetworkIsolation"] = True
    request["HyperParameters"]["sagemaker_submit_directory"] = json.dumps(submit_directory)
    request["InputDataConfig"].append({"ChannelName": "code", "DataSource": {"S3DataSource": {
        "S3DataType": "S3Prefix", "S3Uri": f"s3://local-mode-test-artifacts/{ASSET_KEY}",
        "S3DataDistributionType": "FullyReplicated"}}})
    return request


def test_an_isolated_job_runs_the_code_channel_file_under_the_objects_own_name(sagemaker, s3, training_request,
                                                                              wait_for_end):
    # Given an isolated job whose submit directory is the code channel's object, by the name SageMaker gives it
    sagemaker.create_training_job(**_isolated_request(training_request, s3, "api-isolated",
                                                      f"/opt/ml/input/data/code/{ASSET_KEY}"))
    # When it runs, Then the container unpacks the bundle from the channel and trains
    assert wait_for_end("api-isolated")["TrainingJobStatus"] == "Completed"


def test_an_isolated_job_pointing_at_a_file_the_channel_does_not_hold_fails_as_the_container_does(
        sagemaker, s3, training_request, wait_for_end):
    # Given the SDK's fixed path, which the channel of an asset-named object does not hold
    sagemaker.create_training_job(**_isolated_request(training_request, s3, "api-isolated-missing",
                                                      "/opt/ml/input/data/code/sourcedir.tar.gz"))
    # When it runs, Then the job fails before training, naming the missing file
    description = wait_for_end("api-isolated-missing")
    assert description["TrainingJobStatus"] == "Failed"
    assert description["FailureReason"].startswith("AlgorithmError: ")
    assert "/opt/ml/input/data/code/sourcedir.tar.gz" in description["FailureReason"]


def test_stop_sends_sigterm_and_ends_stopped(sagemaker, s3, training_request, wait_for_end):
    # Given a job that trains until it is told to stop
    sagemaker.create_training_job(**training_request("api-stop", "sleep_until_stopped.py"))
    wait_until_logged(sagemaker, "api-stop", "step")

    # When it is stopped
    sagemaker.stop_training_job(TrainingJobName="api-stop")
    description = wait_for_end("api-stop")

    # Then the script got SIGTERM in time to save, and the job is Stopped with what it saved uploaded
    assert description["TrainingJobStatus"] == "Stopped"
    assert [step["Status"] for step in description["SecondaryStatusTransitions"]][-2:] == ["Stopping", "Stopped"]
    saved = read_tar_member(s3, description["ModelArtifacts"]["S3ModelArtifacts"], "stopped-by-sigterm.txt")
    assert saved == b"checkpoint written"
    # And a stopped job cannot be stopped again
    with pytest.raises(ClientError) as raised:
        sagemaker.stop_training_job(TrainingJobName="api-stop")
    assert raised.value.response["Error"]["Code"] == "ValidationException"


def test_list_filters_sorts_and_pages(sagemaker, training_request, wait_for_end):
    # Given three jobs, one of which fails
    for name, script in (("list-a", "write_model.py"), ("list-b", "fail.py"), ("list-c", "write_model.py")):
        sagemaker.create_training_job(**training_request(name, script))
        wait_for_end(name)

    # When listed by status, by name and a page at a time
    completed = sagemaker.list_training_jobs(StatusEquals="Completed", SortBy="Name", SortOrder="Ascending")
    first_page = sagemaker.list_training_jobs(MaxResults=2)
    second_page = sagemaker.list_training_jobs(MaxResults=2, NextToken=first_page["NextToken"])

    # Then each answer holds what the filters select, newest first by default
    assert [job["TrainingJobName"] for job in completed["TrainingJobSummaries"]] == ["list-a", "list-c"]
    assert [job["TrainingJobName"] for job in first_page["TrainingJobSummaries"]] == ["list-c", "list-b"]
    assert [job["TrainingJobName"] for job in second_page["TrainingJobSummaries"]] == ["list-a"]
    assert "NextToken" not in second_page


def wait_until_logged(sagemaker, name: str, metric: str) -> None:
    """Until the job is Training and its script has logged `metric` (so it is past its own start-up)."""
    for _ in range(300):
        description = sagemaker.describe_training_job(TrainingJobName=name)
        logged = {entry["MetricName"] for entry in description.get("FinalMetricDataList", [])}
        if description["SecondaryStatus"] == "Training" and metric in logged:
            return
        time.sleep(0.1)
    raise AssertionError(f"{name} never logged {metric} while Training")
