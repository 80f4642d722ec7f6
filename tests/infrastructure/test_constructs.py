"""Fine-grained assertions per construct, each built alone in a bare Stack()."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aws_cdk import RemovalPolicy
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from aws_cdk.assertions import Match, Template

from stacks.buckets import ProjectBuckets
from stacks.encryption import ProjectKey
from stacks.execution_role import SageMakerExecutionRole
from stacks.config import RegistrationThreshold
from stacks.image_repository import TrainingImageRepository
from stacks.inference_image import InferenceImage
from stacks.job_watchdog import StalledJobWatchdog
from stacks.model_registration import ModelRegistration
from stacks.notifications import JobNotifications
from stacks.training_image import DlcImage
from stacks.training_trigger import TrainingTrigger

from .synthesis import bare_stack

DLC = DlcImage(uri="763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.2.0-gpu-py310",
               registry_account="763104351884", region="us-east-1", repository_name="pytorch-training")


def _policy_statements(template: Template) -> list[dict]:
    return [statement for policy in template.find_resources("AWS::IAM::Policy").values()
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]]


def test_project_key_rotates() -> None:
    stack = bare_stack()
    ProjectKey(stack, "Key", project_prefix="ranker", removal_policy=RemovalPolicy.RETAIN)
    template = Template.from_stack(stack)
    template.has_resource("AWS::KMS::Key", {"Properties": {"EnableKeyRotation": True},
                                            "DeletionPolicy": "Retain"})


def test_project_key_lets_eventbridge_and_alarms_encrypt_for_the_topic() -> None:
    # Given the project key, which encrypts the notification topic
    stack = bare_stack()
    ProjectKey(stack, "Key", project_prefix="ranker", removal_policy=RemovalPolicy.RETAIN)
    [key] = Template.from_stack(stack).find_resources("AWS::KMS::Key").values()
    # When its statements for the publishing services are read
    by_service = {statement["Principal"]["Service"]: statement
                  for statement in key["Properties"]["KeyPolicy"]["Statement"]
                  if statement["Principal"].get("Service") in ("events.amazonaws.com", "cloudwatch.amazonaws.com")}
    # Then both may encrypt messages for the topic. SNS does not support aws:SourceAccount / aws:SourceArn in the
    # key policy for EventBridge-to-encrypted-topic delivery (such a condition drops every event), while
    # CloudWatch's statement keeps the account condition; the topic policy scopes both to their sources.
    assert {service: sorted(statement["Action"]) for service, statement in by_service.items()} == {
        "events.amazonaws.com": ["kms:Decrypt", "kms:GenerateDataKey*"],
        "cloudwatch.amazonaws.com": ["kms:Decrypt", "kms:GenerateDataKey*"]}
    assert "Condition" not in by_service["events.amazonaws.com"]
    assert by_service["cloudwatch.amazonaws.com"]["Condition"] == {
        "StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}}


@pytest.mark.parametrize("with_key", [True, False])
def test_buckets_are_versioned_private_encrypted_logged_and_expire_old_versions(with_key: bool) -> None:
    stack = bare_stack()
    key = kms.Key(stack, "Key") if with_key else None
    ProjectBuckets(stack, "Buckets", key=key, removal_policy=RemovalPolicy.RETAIN, noncurrent_version_expiration_days=9,
                   access_log_retention_days=30)
    template = Template.from_stack(stack)
    buckets = template.find_resources("AWS::S3::Bucket")
    assert len(buckets) == 3
    for logical_id, bucket in buckets.items():
        properties = bucket["Properties"]
        assert properties["VersioningConfiguration"] == {"Status": "Enabled"}
        assert properties["PublicAccessBlockConfiguration"] == {
            "BlockPublicAcls": True, "BlockPublicPolicy": True, "IgnorePublicAcls": True, "RestrictPublicBuckets": True}
        rule = properties["LifecycleConfiguration"]["Rules"][0]
        assert rule["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 7}
        assert rule["NoncurrentVersionExpiration"] == {"NoncurrentDays": 9}
        algorithm = properties["BucketEncryption"]["ServerSideEncryptionConfiguration"][0][
            "ServerSideEncryptionByDefault"]["SSEAlgorithm"]
        expected = "aws:kms" if with_key and "AccessLog" not in logical_id else "AES256"
        assert algorithm == expected, logical_id
        if "AccessLog" not in logical_id:
            assert "LoggingConfiguration" in properties, logical_id
    data_id = next(logical_id for logical_id in buckets if "TrainingData" in logical_id)
    template.has_resource_properties("Custom::S3BucketNotifications", {
        "BucketName": {"Ref": data_id}, "NotificationConfiguration": {"EventBridgeConfiguration": {}}})


def test_image_repository_scans_on_push_keeps_tags_immutable_and_the_newest_images() -> None:
    stack = bare_stack()
    TrainingImageRepository(stack, "Repo", key=kms.Key(stack, "Key"), removal_policy=RemovalPolicy.RETAIN,
                            images_to_keep=7, pinned_tag=None)
    template = Template.from_stack(stack)
    template.has_resource_properties("AWS::ECR::Repository", {
        "ImageScanningConfiguration": {"ScanOnPush": True},
        "ImageTagMutability": "IMMUTABLE",
        "EncryptionConfiguration": {"EncryptionType": "KMS", "KmsKey": Match.any_value()},
        "LifecyclePolicy": {"LifecyclePolicyText": Match.string_like_regexp(r'"countNumber":7')},
    })


def _execution_role(subnet_ids: tuple[str, ...] = (), security_group_ids: tuple[str, ...] = (), *,
                    with_key: bool = False) -> Template:
    stack = bare_stack()
    SageMakerExecutionRole(
        stack, "Role", data_bucket=s3.Bucket(stack, "Data"), dataset_prefix="datasets/",
        artifacts_bucket=s3.Bucket(stack, "Artifacts"), repository=ecr.Repository(stack, "Repo"), dlc_image=DLC,
        key=kms.Key(stack, "Key") if with_key else None, subnet_ids=subnet_ids, security_group_ids=security_group_ids)
    return Template.from_stack(stack)


@pytest.mark.parametrize("with_key", [True, False])
def test_execution_role_creates_volume_key_grants_for_aws_resources_only(with_key: bool) -> None:
    # Given the role with and without the project key (VolumeKmsKeyId is sent only with the key)
    statements = _policy_statements(_execution_role(with_key=with_key))
    # When its CreateGrant statements are read
    grants = [statement for statement in statements if "kms:CreateGrant" in statement["Action"]]
    # Then SageMaker may create the volume key's grant on the role's behalf (AWS: the execution role needs
    # kms:CreateGrant for a volume key), on that key only and only for grants an AWS service uses
    if not with_key:
        assert grants == []
        return
    [grant] = grants
    assert grant["Action"] == "kms:CreateGrant"
    assert grant["Condition"] == {"Bool": {"kms:GrantIsForAWSResource": "true"}}
    assert list(grant["Resource"]) == ["Fn::GetAtt"] and grant["Resource"]["Fn::GetAtt"][1] == "Arn"


def test_execution_role_is_for_sagemaker_and_pulls_only_the_configured_dlc_repository() -> None:
    template = _execution_role()
    template.has_resource_properties("AWS::IAM::Role", {"AssumeRolePolicyDocument": {"Statement": [
        Match.object_like({"Principal": {"Service": "sagemaker.amazonaws.com"}})]}})
    dlc = [statement for statement in _policy_statements(template)
           if statement.get("Sid") == "PullAwsDeepLearningContainer"]
    resource = dlc[0]["Resource"]
    assert resource["Fn::Join"][1][-1] == ":ecr:us-east-1:763104351884:repository/pytorch-training"


def test_execution_role_gets_eni_actions_only_with_a_vpc() -> None:
    without_vpc = [action for statement in _policy_statements(_execution_role())
                   for action in statement["Action"] if str(action).startswith("ec2:")]
    with_vpc = [action for statement in _policy_statements(_execution_role(("subnet-0123456789abcdef0",),
                                                                           ("sg-0123456789abcdef0",)))
                for action in statement["Action"] if str(action).startswith("ec2:")]
    assert without_vpc == []
    assert "ec2:CreateNetworkInterface" in with_vpc
    # SageMaker's documented VPC actions, each on the resources EC2 can authorize it on
    statements = _policy_statements(_execution_role(("subnet-0123456789abcdef0",), ("sg-0123456789abcdef0",)))
    unscoped = {action for statement in statements if statement["Resource"] == "*"
                for action in statement["Action"] if action.startswith("ec2:")}
    assert unscoped == {"ec2:DescribeNetworkInterfaces", "ec2:DescribeVpcs", "ec2:DescribeDhcpOptions",
                        "ec2:DescribeSubnets", "ec2:DescribeSecurityGroups", "ec2:DeleteNetworkInterfacePermission"}
    assert set(with_vpc) - unscoped == {"ec2:CreateNetworkInterface", "ec2:CreateNetworkInterfacePermission",
                                        "ec2:DeleteNetworkInterface"}


def _trigger(tmp_path: Path, *, retrain_schedule: str | None, reserved_concurrency: int | None = 3) -> Template:
    stack = bare_stack()
    asset_dir = tmp_path / "asset"
    asset_dir.mkdir()
    (asset_dir / "handler.py").write_text("def lambda_handler(event, context):\n    return None\n")
    TrainingTrigger(
        stack, "Trigger", asset_dir=asset_dir, environment={"DATA_BUCKET": "x"}, data_bucket=s3.Bucket(stack, "Data"),
        dataset_prefix="datasets/", marker_names=("_SUCCESS", "manifest.json"), project_prefix="ranker",
        execution_role=iam.Role(stack, "Exec", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com")),
        topic=sns.Topic(stack, "Topic"), key=kms.Key(stack, "Key"), environment_key=kms.Key(stack, "EnvKey"),
        reserved_concurrency=reserved_concurrency, timeout_seconds=45, retry_attempts=1, max_event_age_seconds=600,
        log_retention_days=30, retrain_schedule=retrain_schedule, removal_policy=RemovalPolicy.DESTROY)
    return Template.from_stack(stack)


def test_trigger_function_is_arm64_current_python_bounded_and_retries_into_an_encrypted_dlq(tmp_path: Path) -> None:
    template = _trigger(tmp_path, retrain_schedule=None)
    template.has_resource_properties("AWS::Lambda::Function", {
        "Handler": "handler.lambda_handler", "Runtime": Match.string_like_regexp(r"^python3\.1[3-9]$"),
        "Architectures": ["arm64"], "ReservedConcurrentExecutions": 3, "Timeout": 45,
        "KmsKeyArn": Match.any_value(),
    })
    template.has_resource_properties("AWS::Lambda::EventInvokeConfig", {
        "MaximumRetryAttempts": 1, "MaximumEventAgeInSeconds": 600,
        "DestinationConfig": {"OnFailure": {"Destination": Match.any_value()}},
    })
    template.has_resource_properties("AWS::SQS::Queue", {"KmsMasterKeyId": Match.any_value()})
    template.has_resource_properties("AWS::Logs::LogGroup", {"RetentionInDays": 30, "KmsKeyId": Match.any_value()})


def test_trigger_without_a_reservation_leaves_concurrency_unreserved(tmp_path: Path) -> None:
    template = _trigger(tmp_path, retrain_schedule=None, reserved_concurrency=None)
    template.has_resource_properties("AWS::Lambda::Function", {
        "Handler": "handler.lambda_handler", "ReservedConcurrentExecutions": Match.absent()})


def test_trigger_rule_matches_marker_keys_under_the_dataset_prefix(tmp_path: Path) -> None:
    template = _trigger(tmp_path, retrain_schedule=None)
    template.has_resource_properties("AWS::Events::Rule", {"EventPattern": {
        "source": ["aws.s3"], "detail-type": ["Object Created"],
        "detail": {"bucket": {"name": [Match.any_value()]},
                   "object": {"key": [{"wildcard": "datasets/*/_SUCCESS"}, {"wildcard": "datasets/*/manifest.json"}]}},
    }})
    assert template.find_resources("AWS::Events::Rule", {"Properties": {"ScheduleExpression": Match.any_value()}}) == {}


def test_trigger_schedule_rule_exists_only_when_configured(tmp_path: Path) -> None:
    template = _trigger(tmp_path, retrain_schedule="rate(7 days)")
    template.has_resource_properties("AWS::Events::Rule", {"ScheduleExpression": "rate(7 days)",
                                                           "Targets": [Match.object_like({"Arn": Match.any_value()})]})


def test_trigger_passes_the_execution_role_only_to_sagemaker(tmp_path: Path) -> None:
    statements = _policy_statements(_trigger(tmp_path, retrain_schedule=None))
    pass_role = [statement for statement in statements if statement["Action"] == "iam:PassRole"]
    assert len(pass_role) == 1
    assert pass_role[0]["Condition"] == {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}
    assert "Fn::GetAtt" in pass_role[0]["Resource"]


def test_trigger_may_start_tag_and_describe_only_this_projects_tuning_jobs(tmp_path: Path) -> None:
    # (describe: a warm start's parents are read to check their dataset)
    by_sid = {statement.get("Sid"): statement
              for statement in _policy_statements(_trigger(tmp_path, retrain_schedule=None))}
    tuning = by_sid["StartProjectTuningJobs"]
    assert tuning["Action"] == ["sagemaker:AddTags", "sagemaker:CreateHyperParameterTuningJob",
                                "sagemaker:DescribeHyperParameterTuningJob"]
    assert json.dumps(tuning["Resource"]).endswith(':hyper-parameter-tuning-job/ranker-*"]]}')


@pytest.mark.parametrize("email", [None, "ml-team@example.com"])
def test_notifications_topic_is_encrypted_and_hears_this_projects_jobs(email: str | None) -> None:
    stack = bare_stack()
    JobNotifications(stack, "Notifications", project_prefix="ranker", key=kms.Key(stack, "Key"),
                     notification_email=email)
    template = Template.from_stack(stack)
    template.has_resource_properties("AWS::SNS::Topic", {"KmsMasterKeyId": Match.any_value()})
    template.has_resource_properties("AWS::Events::Rule", {"EventPattern": {
        "source": ["aws.sagemaker"], "detail-type": ["SageMaker Training Job State Change"],
        "detail": {"TrainingJobName": [{"prefix": "ranker-"}], "TrainingJobStatus": ["Completed", "Failed", "Stopped"]},
    }})
    template.has_resource_properties("AWS::Events::Rule", {"EventPattern": {
        "source": ["aws.sagemaker"], "detail-type": ["SageMaker HyperParameter Tuning Job State Change"],
        "detail": {"HyperParameterTuningJobName": [{"prefix": "ranker-"}],
                   "HyperParameterTuningJobStatus": ["Completed", "Failed", "Stopped"]},
    }})
    template.resource_count_is("AWS::SNS::Subscription", 1 if email else 0)
    # Only this stack's state rules may publish as EventBridge, for this account
    template.has_resource_properties("AWS::SNS::TopicPolicy", {"PolicyDocument": {"Statement": Match.array_with([
        Match.object_like({"Effect": "Allow", "Principal": {"Service": "events.amazonaws.com"},
                           "Condition": {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}},
                                         "ArnEquals": {"aws:SourceArn": [
                                             {"Fn::GetAtt": [Match.string_like_regexp(rule), "Arn"]}
                                             for rule in ("TrainingJobStateRule", "TuningJobStateRule")]}}})])}})


def _registration(tmp_path: Path, threshold: RegistrationThreshold | None = None) -> Template:
    stack = bare_stack()
    asset_dir = tmp_path / "registrar"
    asset_dir.mkdir()
    (asset_dir / "handler.py").write_text("def lambda_handler(event, context):\n    return None\n")
    key = kms.Key(stack, "Key")
    ModelRegistration(stack, "Registration", asset_dir=asset_dir, project_prefix="ranker",
                      quality_metrics=("val_ndcg@10", "test_ndcg@10"), threshold=threshold,
                      inference_image=InferenceImage(
                          uri="763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-inference:2.6.0-cpu-py312",
                          framework_version="2.6.0"),
                      inference_instance_type="ml.m5.large",
                      artifacts_bucket=s3.Bucket(stack, "Artifacts", encryption_key=key),
                      topic=sns.Topic(stack, "Topic"), key=key, environment_key=kms.Key(stack, "EnvKey"),
                      log_retention_days=14, removal_policy=RemovalPolicy.DESTROY)
    return Template.from_stack(stack)


def test_registration_runs_on_this_projects_completed_jobs_only(tmp_path: Path) -> None:
    template = _registration(tmp_path)
    template.has_resource_properties("AWS::Events::Rule", {"EventPattern": {
        "source": ["aws.sagemaker"], "detail-type": ["SageMaker Training Job State Change"],
        "detail": {"TrainingJobName": [{"prefix": "ranker-"}], "TrainingJobStatus": ["Completed"]},
    }, "Targets": [Match.object_like({"DeadLetterConfig": {"Arn": Match.any_value()},
                                      "RetryPolicy": {"MaximumRetryAttempts": 2,
                                                      "MaximumEventAgeInSeconds": 7200}})]})
    template.has_resource_properties("AWS::Lambda::Function", {
        "Handler": "handler.lambda_handler", "Architectures": ["arm64"], "KmsKeyArn": Match.any_value(),
        "Environment": {"Variables": Match.object_like({"PROJECT_PREFIX": "ranker", "THRESHOLD_METRIC": "",
                                                        "THRESHOLD_MINIMUM": "",
                                                        "MODEL_QUALITY_METRICS": "val_ndcg@10,test_ndcg@10"})},
    })
    template.has_resource_properties("AWS::Lambda::EventInvokeConfig", {
        "DestinationConfig": {"OnFailure": {"Destination": Match.any_value()}}})
    template.has_resource_properties("AWS::SQS::Queue", {"KmsMasterKeyId": Match.any_value()})
    template.has_resource_properties("AWS::Logs::LogGroup", {"RetentionInDays": 14, "KmsKeyId": Match.any_value()})


def test_registration_hears_this_projects_completed_tuning_jobs_and_may_only_describe_them(tmp_path: Path) -> None:
    template = _registration(tmp_path)
    template.has_resource_properties("AWS::Events::Rule", {"EventPattern": {
        "source": ["aws.sagemaker"], "detail-type": ["SageMaker HyperParameter Tuning Job State Change"],
        "detail": {"HyperParameterTuningJobName": [{"prefix": "ranker-"}],
                   "HyperParameterTuningJobStatus": ["Completed"]},
    }, "Targets": [Match.object_like({"DeadLetterConfig": {"Arn": Match.any_value()}})]})
    by_sid = {statement.get("Sid"): statement for statement in _policy_statements(template)}
    assert by_sid["ReadProjectTuningJobs"]["Action"] == "sagemaker:DescribeHyperParameterTuningJob"
    assert json.dumps(by_sid["ReadProjectTuningJobs"]["Resource"]).endswith(
        ':hyper-parameter-tuning-job/ranker-*"]]}')


def test_registration_threshold_reaches_the_function(tmp_path: Path) -> None:
    template = _registration(tmp_path, RegistrationThreshold(metric="test_ndcg@10", minimum=0.7))
    template.has_resource_properties("AWS::Lambda::Function", {"Environment": {"Variables": Match.object_like(
        {"THRESHOLD_METRIC": "test_ndcg@10", "THRESHOLD_MINIMUM": "0.7"})}})


def test_registration_may_only_read_project_jobs_and_artifacts_write_project_groups_and_the_quality_report(
        tmp_path: Path) -> None:
    statements = _policy_statements(_registration(tmp_path))
    by_sid = {statement.get("Sid"): statement for statement in statements}
    assert by_sid["ReadProjectTrainingJobs"]["Action"] == ["sagemaker:DescribeTrainingJob", "sagemaker:ListTags"]
    assert json.dumps(by_sid["ReadProjectTrainingJobs"]["Resource"]).endswith(':training-job/ranker-*"]]}')
    registry = by_sid["RegisterInProjectPackageGroups"]
    assert registry["Action"] == ["sagemaker:CreateModelPackage", "sagemaker:CreateModelPackageGroup",
                                  "sagemaker:DescribeModelPackageGroup"]
    resources = [json.dumps(resource) for resource in registry["Resource"]]
    assert [resource.rsplit(":", 1)[-1] for resource in resources] == [
        'model-package-group/ranker-*"]]}', 'model-package/ranker-*"]]}']
    writes = [statement for statement in statements
              if "s3:PutObject" in statement["Action"]]
    assert len(writes) == 1 and json.dumps(writes[0]["Resource"]).endswith('/models/*/output/model_quality.json"]]}')
    assert any(statement["Action"] == "sns:Publish" for statement in statements)
    # It reads each job's model.tar.gz (for the serving handler a package needs) and no other object
    reads = [statement for statement in statements if "s3:GetObject*" in statement["Action"]]
    assert len(reads) == 1
    objects = [json.dumps(resource) for resource in reads[0]["Resource"] if "/" in json.dumps(resource)]
    assert len(objects) == 1 and objects[0].endswith('/models/*/output/model.tar.gz"]]}')
    assert not any("sagemaker:CreateTrainingJob" in json.dumps(statement["Action"]) for statement in statements)


def _watchdog(tmp_path: Path) -> Template:
    stack = bare_stack()
    asset_dir = tmp_path / "watchdog"
    asset_dir.mkdir()
    (asset_dir / "handler.py").write_text("def lambda_handler(event, context):\n    return None\n")
    StalledJobWatchdog(stack, "Watchdog", asset_dir=asset_dir, project_prefix="ranker", stall_minutes=45,
                       check_every_minutes=5, topic=sns.Topic(stack, "Topic"), key=kms.Key(stack, "Key"),
                       environment_key=kms.Key(stack, "EnvKey"), log_retention_days=14,
                       removal_policy=RemovalPolicy.DESTROY)
    return Template.from_stack(stack)


def test_watchdog_sweeps_on_its_schedule_with_the_allowed_silence(tmp_path: Path) -> None:
    template = _watchdog(tmp_path)
    # Then EventBridge invokes it every stall_check_minutes, its failed deliveries kept in its queue
    template.has_resource_properties("AWS::Events::Rule", {
        "ScheduleExpression": "rate(5 minutes)",
        "Targets": [Match.object_like({"DeadLetterConfig": {"Arn": Match.any_value()}})]})
    # And the function knows the project, the silence allowed (in seconds), SageMaker's log group and the topic
    template.has_resource_properties("AWS::Lambda::Function", {
        "Handler": "handler.lambda_handler", "Architectures": ["arm64"], "KmsKeyArn": Match.any_value(),
        "Environment": {"Variables": Match.object_like({
            "PROJECT_PREFIX": "ranker", "STALL_SECONDS": "2700", "TRAINING_LOG_GROUP": "/aws/sagemaker/TrainingJobs",
            "NOTIFICATION_TOPIC_ARN": Match.any_value(), "POWERTOOLS_SERVICE_NAME": "stalled-job-watchdog"})}})
    # And a sweep that fails is not retried (the next one looks again) but lands in the encrypted queue
    template.has_resource_properties("AWS::Lambda::EventInvokeConfig", {
        "MaximumRetryAttempts": 0, "MaximumEventAgeInSeconds": 300,
        "DestinationConfig": {"OnFailure": {"Destination": Match.any_value()}}})
    template.has_resource_properties("AWS::SQS::Queue", {"KmsMasterKeyId": Match.any_value()})


def test_watchdog_may_stop_only_project_jobs_and_read_only_their_training_logs(tmp_path: Path) -> None:
    statements = _policy_statements(_watchdog(tmp_path))
    by_sid = {statement.get("Sid"): statement for statement in statements}
    # ListTrainingJobs takes no resource-level permission; everything it finds is acted on by name prefix only
    assert (by_sid["ListTrainingJobs"]["Action"], by_sid["ListTrainingJobs"]["Resource"]) == (
        "sagemaker:ListTrainingJobs", "*")
    stop = by_sid["StopProjectTrainingJobs"]
    assert stop["Action"] == ["sagemaker:DescribeTrainingJob", "sagemaker:StopTrainingJob"]
    assert json.dumps(stop["Resource"]).endswith(':training-job/ranker-*"]]}')
    listing = [json.dumps(resource) for resource in by_sid["ListTrainingLogStreams"]["Resource"]]
    assert by_sid["ListTrainingLogStreams"]["Action"] == "logs:DescribeLogStreams"
    assert [resource.split(":log-group:", 1)[-1] for resource in listing] == ['/aws/sagemaker/TrainingJobs"]]}',
                                                                              '/aws/sagemaker/TrainingJobs:*"]]}']
    assert by_sid["ReadProjectTrainingLogs"]["Action"] == "logs:GetLogEvents"
    assert json.dumps(by_sid["ReadProjectTrainingLogs"]["Resource"]).endswith(
        ':log-group:/aws/sagemaker/TrainingJobs:log-stream:ranker-*"]]}')
    # And nothing else of SageMaker or CloudWatch Logs: no job creation, no other log group, no log writes but its own
    actions = {action for statement in statements for action in
               (statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]])}
    assert {action for action in actions if action.startswith(("sagemaker:", "logs:"))} == {
        "sagemaker:ListTrainingJobs", "sagemaker:DescribeTrainingJob", "sagemaker:StopTrainingJob",
        "logs:DescribeLogStreams", "logs:GetLogEvents", "logs:CreateLogStream", "logs:PutLogEvents"}
