"""With network isolation, a job's code arrives as the `code` channel: the synthesized stack's request names the file
SageMaker downloads, and its execution role may fetch exactly that channel.

The bundle's S3 key is the CDK file asset's (`<asset hash>.gz` in the bootstrap bucket), read from the synthesized
template, never a fixture that happens to end in `sourcedir.tar.gz`.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import PurePosixPath
from typing import Any

import boto3
import pytest
from aws_cdk import App, Environment
from aws_cdk.assertions import Template
from training_trigger.planning import TrainingJobSpec
from training_trigger.request import build_training_job_request
from training_trigger.settings import Settings, settings_from

from local_mode.aws.s3_transfer import download_prefix, split_s3_uri
from stacks.inference_image import resolve_inference_image
from stacks.stateless_stack import StatelessStack
from stacks.training_image import resolve_dlc_image
from stacks.trigger_environment import STATIC_SETTINGS_FILE

from .iam_policy import allows, resolve
from .synthesis import STAND_INS, config_for, feature_flags, resources_of_type, trigger_function

CONTAINER_ROOT = PurePosixPath("/opt/ml")


@pytest.fixture(scope="module")
def isolated_pipeline(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The pipeline stack of `-c enable_network_isolation=true`, synthesized as `cdk synth` does (assets included)."""
    config = config_for("dev", enable_network_isolation=True)
    build_dir = tmp_path_factory.mktemp("isolated")
    stack = StatelessStack(App(context=feature_flags()), "ranker-dev-pipeline", config=config,
                           export_prefix="ranker-dev", dlc_image=resolve_dlc_image(config),
                           inference_image=resolve_inference_image(config), build_dir=build_dir,
                           env=Environment(region=config.region))
    static = json.loads((build_dir / "lambda-trigger" / STATIC_SETTINGS_FILE).read_text())
    return {"config": config, "template": Template.from_stack(stack).to_json(), "static": static,
            "bundle": build_dir / "training-source" / "sourcedir.tar.gz"}


def _trigger_settings(pipeline: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Settings:
    region = pipeline["config"].region
    variables = trigger_function(pipeline["template"])["Properties"]["Environment"]["Variables"]
    environment = {}
    for name, value in variables.items():
        resolved = resolve(value, region=region)
        environment[name] = resolved if isinstance(resolved, str) else STAND_INS[name]
    monkeypatch.setenv("AWS_DEFAULT_REGION", region)
    return settings_from({**environment, "AWS_REGION": region}, pipeline["static"], STATIC_SETTINGS_FILE)


def _execution_role_statements(template: dict[str, Any]) -> list[dict[str, Any]]:
    [role_id] = [logical_id for logical_id, role in resources_of_type(template, "AWS::IAM::Role").items()
                 if "sagemaker.amazonaws.com" in json.dumps(role["Properties"]["AssumeRolePolicyDocument"])]
    return [statement for policy in resources_of_type(template, "AWS::IAM::Policy").values()
            if {"Ref": role_id} in policy["Properties"]["Roles"]
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]]


def _job(settings: Settings) -> TrainingJobSpec:
    return TrainingJobSpec(
        job_name="ranker-web-v1-0123456789ab", entry_point=settings.default_entry_point,
        distribution=settings.default_distribution, instance_type=settings.default_instance_type,
        instance_count=1, max_runtime=3600, spot=False, tensorboard=False, hyperparameters={},
        channels={"train": "s3://ranker-data-example/datasets/web/v1/train/"}, tags={})


def test_the_code_channel_arrives_where_the_submit_directory_points(isolated_pipeline, monkeypatch, tmp_path, aws_mock):
    # Given the synthesized stack's trigger settings, and its bundle published under the asset's own key
    settings = _trigger_settings(isolated_pipeline, monkeypatch)
    bucket, key = split_s3_uri(settings.source_bundle_uri)
    assert not key.endswith("sourcedir.tar.gz"), key  # the real asset key shape: <asset hash>.gz
    request = build_training_job_request(_job(settings), settings)
    [code] = [channel for channel in request["InputDataConfig"] if channel["ChannelName"] == "code"]
    assert code["DataSource"]["S3DataSource"] == {"S3DataType": "S3Prefix", "S3Uri": settings.source_bundle_uri,
                                                  "S3DataDistributionType": "FullyReplicated"}
    # When the channel is downloaded as SageMaker downloads an S3Prefix channel (each object under its key below
    # the prefix) into one host's /opt/ml
    with aws_mock():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=bucket)
        s3.upload_file(str(isolated_pipeline["bundle"]), bucket, key)
        download_prefix(s3, code["DataSource"]["S3DataSource"]["S3Uri"], tmp_path / "input" / "data" / "code")
    # Then the toolkit finds the bundle at sagemaker_submit_directory, with the entry point inside
    submit_directory = PurePosixPath(json.loads(request["HyperParameters"]["sagemaker_submit_directory"]))
    bundle = tmp_path / submit_directory.relative_to(CONTAINER_ROOT)
    assert bundle.is_file(), f"{submit_directory} is not where the channel put {key}: {list(tmp_path.rglob('*'))}"
    with tarfile.open(bundle, "r:gz") as archive:
        assert settings.default_entry_point in archive.getnames()


def test_the_execution_role_may_list_and_read_exactly_the_code_channel(isolated_pipeline, monkeypatch):
    # Given the code channel of the synthesized stack's request
    settings = _trigger_settings(isolated_pipeline, monkeypatch)
    bucket, key = split_s3_uri(settings.source_bundle_uri)
    statements = resolve(_execution_role_statements(isolated_pipeline["template"]),
                         region=isolated_pipeline["config"].region)
    bucket_arn = f"arn:aws:s3:::{bucket}"
    # When SageMaker lists the channel's prefix and reads its object as the execution role
    # Then both are allowed,
    assert allows(statements, "s3:ListBucket", bucket_arn, {"s3:prefix": key})
    assert allows(statements, "s3:GetObject", f"{bucket_arn}/{key}")
    # and nothing else of the bootstrap bucket (other stacks' assets) can be listed or read
    for other_prefix in ("", key.rsplit(".", 1)[0][:8], "other-asset.zip"):
        assert not allows(statements, "s3:ListBucket", bucket_arn, {"s3:prefix": other_prefix}), other_prefix
    assert not allows(statements, "s3:ListBucket", bucket_arn)
    assert not allows(statements, "s3:GetObject", f"{bucket_arn}/other-asset.zip")


def test_without_isolation_the_role_reads_the_bundle_but_lists_nothing_of_its_bucket(dev_app):
    config = dev_app.config
    variables = trigger_function(dev_app.stateless)["Properties"]["Environment"]["Variables"]
    bucket, key = split_s3_uri(resolve(variables["SOURCE_BUNDLE_URI"], region=config.region))
    statements = resolve(_execution_role_statements(dev_app.stateless), region=config.region)
    assert allows(statements, "s3:GetObject", f"arn:aws:s3:::{bucket}/{key}")
    assert not allows(statements, "s3:ListBucket", f"arn:aws:s3:::{bucket}", {"s3:prefix": key})
