"""Template tokens resolved to local resources, as CloudFormation would resolve them to deployed ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ranker.log_format import metric_definitions

from local_mode.aws.local_clients import LOCAL_REGION, local_account_id, local_client
from local_mode.aws.stack_resources import LocalStackResources

ASSET_HASH = "ab12"
TUNING_PATTERN = {"source": ["aws.sagemaker"], "detail-type": ["SageMaker HyperParameter Tuning Job State Change"],
                  "detail": {"HyperParameterTuningJobStatus": ["Completed"]}}
STATEFUL = {
    "Resources": {"DataBucket": {"Type": "AWS::S3::Bucket"}, "KeyArn": {"Type": "AWS::KMS::Key"}},
    "Outputs": {"DataBucketName": {"Value": {"Ref": "DataBucket"}, "Export": {"Name": "proj-data-bucket"}}},
}
PIPELINE = {"Resources": {
    "Topic": {"Type": "AWS::SNS::Topic"},
    "Role": {"Type": "AWS::IAM::Role"},
    "Trigger": {"Type": "AWS::Lambda::Function", "Properties": {
        "Handler": "handler.lambda_handler",
        "Code": {"S3Bucket": {"Fn::Sub": "cdk-assets-${AWS::AccountId}-${AWS::Region}"},
                 "S3Key": f"{ASSET_HASH}.zip"},
        "Environment": {"Variables": {
            "JOB_NAME_PREFIX": "proj",
            "DATA_BUCKET": {"Fn::ImportValue": "proj-data-bucket"},
            "OUTPUT_S3_URI": {"Fn::Join": ["", ["s3://", {"Fn::ImportValue": "proj-data-bucket"}, "/models/"]]},
            "ROLE_ARN": {"Fn::GetAtt": ["Role", "Arn"]},
            "NOTIFICATION_TOPIC_ARN": {"Ref": "Topic"},
            "WHERE": {"Fn::Sub": "${AWS::Partition}:${AWS::Region}:${Role.Arn}"},
        }}}},
    "Schedule": {"Type": "AWS::Events::Rule", "Properties": {
        "ScheduleExpression": "rate(10 minutes)", "Targets": [{"Arn": {"Fn::GetAtt": ["Trigger", "Arn"]}, "Id": "0"}]}},
    "TuningRule": {"Type": "AWS::Events::Rule", "Properties": {
        "EventPattern": TUNING_PATTERN, "Targets": [{"Arn": {"Fn::GetAtt": ["Trigger", "Arn"]}, "Id": "0"}]}},
    "OtherRule": {"Type": "AWS::Events::Rule", "Properties": {
        "EventPattern": {"source": ["aws.s3"]}, "Targets": [{"Arn": {"Ref": "Topic"}, "Id": "0"}]}},
    "Deployment": {"Type": "Custom::CDKBucketDeployment", "Properties": {
        "SourceBucketNames": [{"Fn::Sub": "cdk-assets-${AWS::AccountId}-${AWS::Region}"}],
        "SourceObjectKeys": ["ef56.zip"], "DestinationBucketName": {"Fn::ImportValue": "proj-data-bucket"},
        "DestinationBucketKeyPrefix": "model-trainer/ef56/"}},
}}

DEPLOYED_FILES = {"code/train.py": "print('train')\n", "sm_drivers/torchrun/train.py/sm_train.sh": "#!/bin/bash\n"}


@pytest.fixture
def assembly(tmp_path: Path) -> Path:
    """A two-stack cloud assembly with a cross-stack export, folder assets (the function, a BucketDeployment's files)
    and a file asset."""
    (tmp_path / "stateful.template.json").write_text(json.dumps(STATEFUL))
    (tmp_path / "pipeline.template.json").write_text(json.dumps(PIPELINE))
    (tmp_path / f"asset.{ASSET_HASH}").mkdir()
    for name, content in DEPLOYED_FILES.items():
        (tmp_path / "asset.ef56" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "asset.ef56" / name).write_text(content)
    (tmp_path / "asset.cd34.tar.gz").write_bytes(b"source bundle")
    destination = {"bucketName": "cdk-assets-${AWS::AccountId}-${AWS::Region}"}
    (tmp_path / "pipeline.assets.json").write_text(json.dumps({"files": {
        ASSET_HASH: {"source": {"path": f"asset.{ASSET_HASH}", "packaging": "zip"},
                     "destinations": {"current": {**destination, "objectKey": f"{ASSET_HASH}.zip"}}},
        "cd34": {"source": {"path": "asset.cd34.tar.gz", "packaging": "file"},
                 "destinations": {"current": {**destination, "objectKey": "cd34.gz"}}},
        "ef56": {"source": {"path": "asset.ef56", "packaging": "zip"},
                 "destinations": {"current": {**destination, "objectKey": "ef56.zip"}}},
    }}))
    return tmp_path


def test_the_function_environment_resolves_every_token_to_a_local_resource(assembly, moto):
    # Given the assembly on the local endpoint
    resources = LocalStackResources(assembly, moto.url)
    account = local_account_id(moto.url)

    # When the trigger function is looked up by its environment
    function = resources.lambda_function("JOB_NAME_PREFIX")

    # Then imports, joins, attributes and substitutions name resources that now exist locally
    environment = function.environment
    bucket = environment["DATA_BUCKET"]
    assert bucket == "stateful-databucket"
    assert bucket in {entry["Name"] for entry in local_client("s3", moto.url).list_buckets()["Buckets"]}
    assert environment["OUTPUT_S3_URI"] == f"s3://{bucket}/models/"
    assert environment["ROLE_ARN"] == f"arn:aws:iam::{account}:role/pipeline-role"
    topics = local_client("sns", moto.url).list_topics()["Topics"]
    assert {"TopicArn": environment["NOTIFICATION_TOPIC_ARN"]} in topics
    assert environment["WHERE"] == f"aws:{LOCAL_REGION}:{environment['ROLE_ARN']}"
    # And the code is the staged folder asset the template's S3Key names
    assert (function.code_dir, function.handler) == (assembly / f"asset.{ASSET_HASH}", "handler.lambda_handler")


def test_a_function_carries_the_schedule_that_invokes_it_and_an_optional_one_may_be_absent(assembly, moto):
    resources = LocalStackResources(assembly, moto.url)
    assert resources.lambda_function("JOB_NAME_PREFIX").schedule == "rate(10 minutes)"
    assert resources.lambda_function("NO_SUCH_VARIABLE", required=False) is None
    with pytest.raises(LookupError, match="NO_SUCH_VARIABLE"):
        resources.lambda_function("NO_SUCH_VARIABLE")


def test_the_event_patterns_of_the_rules_that_invoke_a_function_are_found(assembly, moto):
    resources = LocalStackResources(assembly, moto.url)
    # The schedule has no pattern, and the other rule targets the topic
    assert resources.event_patterns_targeting("JOB_NAME_PREFIX") == [TUNING_PATTERN]
    assert resources.event_patterns_targeting("NO_SUCH_VARIABLE") == []


def test_file_assets_are_published_where_the_template_expects_them(assembly, moto):
    # Given the assembly on the local endpoint
    resources = LocalStackResources(assembly, moto.url)

    # When its file assets are published
    resources.publish_file_assets()

    # Then the bundle is in the (local) bootstrap bucket under its asset key
    bucket = f"cdk-assets-{local_account_id(moto.url)}-{LOCAL_REGION}"
    body = local_client("s3", moto.url).get_object(Bucket=bucket, Key="cd34.gz")["Body"].read()
    assert body == b"source bundle"


def test_a_bucket_deployments_files_are_unpacked_under_its_prefix(assembly, moto):
    # Given the assembly on the local endpoint, with a BucketDeployment of a folder asset into the data bucket
    resources = LocalStackResources(assembly, moto.url)

    # When the deployments run, as `cdk deploy` runs CDK's handler for each
    resources.run_bucket_deployments()

    # Then each file of the folder is an object under the destination prefix, at its path inside the folder
    s3 = local_client("s3", moto.url)
    bucket = resources.resolve("pipeline", {"Fn::ImportValue": "proj-data-bucket"})
    objects = s3.list_objects_v2(Bucket=bucket, Prefix="model-trainer/ef56/")["Contents"]
    assert {entry["Key"]: s3.get_object(Bucket=bucket, Key=entry["Key"])["Body"].read().decode()
            for entry in objects} == {f"model-trainer/ef56/{name}": content for name, content in DEPLOYED_FILES.items()}


def test_an_unsupported_intrinsic_is_refused_naming_it(assembly, moto):
    # Given a value built with an intrinsic local mode does not resolve
    resources = LocalStackResources(assembly, moto.url)

    # When it is resolved / Then the error names the function and where to add it
    with pytest.raises(ValueError, match=r"Fn::Select.*local_mode/aws/stack_resources.py"):
        resources.resolve("pipeline", {"Fn::Select": [0, ["a", "b"]]})


@pytest.mark.slow  # the demo pipeline synthesizes the app when its sources changed (tens of seconds)
def test_the_synthesized_trigger_gets_the_contracts_environment(demo_pipeline):
    # Given the real app's trigger function, resolved on the local endpoint (fixture)
    environment = demo_pipeline.environment

    # Then it carries the variables of the stack-Lambda contract, pointing at resources that exist locally
    assert {"DATA_BUCKET", "ARTIFACTS_BUCKET", "ROLE_ARN", "SOURCE_BUNDLE_URI", "OUTPUT_S3_URI", "CHECKPOINT_S3_URI",
            "STATIC_SETTINGS_FILE"} <= set(environment)
    # And its bundle carries the settings synthesis fixes, under the name the environment gives
    static = json.loads((demo_pipeline.trigger.code_dir / environment["STATIC_SETTINGS_FILE"]).read_text())
    assert static["metric_definitions"] == metric_definitions()
    buckets = {entry["Name"] for entry in demo_pipeline.s3.list_buckets()["Buckets"]}
    assert {environment["DATA_BUCKET"], environment["ARTIFACTS_BUCKET"]} <= buckets
    bundle_bucket, bundle_key = environment["SOURCE_BUNDLE_URI"].removeprefix("s3://").split("/", 1)
    assert demo_pipeline.s3.head_object(Bucket=bundle_bucket, Key=bundle_key)["ContentLength"] > 0
    assert (demo_pipeline.trigger.code_dir / "aws_lambda_powertools").is_dir()
