"""What the stateful stack keeps and what it lets go: the image a job pins, and the access logs at teardown."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import App
from aws_cdk.assertions import Template

from stacks.config import PipelineConfig
from stacks.stateful_stack import StatefulStack

from .ecr_lifecycle import Image, expired_images
from .synthesis import config_for, feature_flags, resources_of_type


def _stateful_template(config: PipelineConfig) -> dict[str, Any]:
    stack = StatefulStack(App(context=feature_flags()), "Stateful", config=config, export_prefix="ranker-test")
    return Template.from_stack(stack).to_json()


def _lifecycle_policy(template: dict[str, Any]) -> str:
    [repository] = resources_of_type(template, "AWS::ECR::Repository").values()
    return repository["Properties"]["LifecyclePolicy"]["LifecyclePolicyText"]


@pytest.mark.parametrize("env_name", ["dev", "prod"])
def test_no_lifecycle_rule_expires_the_image_tag_the_trigger_pins(env_name: str) -> None:
    # Given a stack whose jobs run the custom image tagged v1, pushed before many newer images (tagged and untagged)
    config = config_for(env_name, image_source="custom", custom_image_tag="v1")
    images = ([Image("sha256:pinned", ("v1",), pushed_days_ago=400)]
              + [Image(f"sha256:tagged-{day}", (f"v1-{day}",), pushed_days_ago=day) for day in range(3 * 12)]
              + [Image(f"sha256:untagged-{day}", (), pushed_days_ago=day) for day in range(12)])
    # When ECR applies the repository's lifecycle policy
    expired = expired_images(_lifecycle_policy(_stateful_template(config)), images)
    # Then the pinned image stays, and the repository still keeps only the newest of the rest
    assert "sha256:pinned" not in expired
    kept = {image.digest for image in images} - expired - {"sha256:pinned"}
    assert len(kept) == config.ecr_images_to_keep


def test_without_a_pinned_tag_the_newest_images_are_kept() -> None:
    # Given the DLC (no image of the repository is pinned) and more images than the stack keeps
    config = config_for("dev")
    images = [Image(f"sha256:{day}", (f"build-{day}",), pushed_days_ago=day) for day in range(25)]
    # When ECR applies the lifecycle policy
    expired = expired_images(_lifecycle_policy(_stateful_template(config)), images)
    # Then exactly the oldest beyond the configured count expire
    assert expired == {f"sha256:{day}" for day in range(config.ecr_images_to_keep, 25)}


def _log_bucket_id(template: dict[str, Any]) -> str:
    """The bucket the other buckets deliver their server access logs to, read from their logging configuration."""
    targets = {bucket["Properties"]["LoggingConfiguration"]["DestinationBucketName"]["Ref"]
               for bucket in resources_of_type(template, "AWS::S3::Bucket").values()
               if "LoggingConfiguration" in bucket["Properties"]}
    [target] = targets
    return target


@pytest.mark.parametrize("env_name", ["dev", "prod"])
def test_teardown_never_deletes_the_bucket_access_logs_may_still_arrive_in(env_name: str) -> None:
    # Given either environment's stateful stack (dev destroys its buckets; S3 delivers access logs late and
    # best-effort, among them the logs of the auto-delete handler's own deletes)
    config = config_for(env_name)
    template = _stateful_template(config)
    log_bucket = _log_bucket_id(template)
    # When CloudFormation deletes the stack
    resource = template["Resources"][log_bucket]
    emptied = [handler for handler in resources_of_type(template, "Custom::S3AutoDeleteObjects").values()
               if handler["Properties"]["BucketName"] == {"Ref": log_bucket}]
    # Then it leaves the log bucket in place instead of emptying it and then failing with BucketNotEmpty,
    assert resource["DeletionPolicy"] == "Retain"
    assert resource["UpdateReplacePolicy"] == "Retain"
    assert emptied == []
    # and the bucket empties itself: logs expire after the configured retention, then their versions and markers
    rules = resource["Properties"]["LifecycleConfiguration"]["Rules"]
    assert {"ExpirationInDays": config.log_retention_days} in [
        {key: value for key, value in rule.items() if key == "ExpirationInDays"} for rule in rules]
    assert any(rule.get("ExpiredObjectDeleteMarker") is True for rule in rules)
    assert any(rule.get("NoncurrentVersionExpiration") for rule in rules)


def test_dev_teardown_still_empties_and_deletes_the_data_and_artifacts_buckets() -> None:
    template = _stateful_template(config_for("dev"))
    log_bucket = _log_bucket_id(template)
    emptied = {handler["Properties"]["BucketName"]["Ref"]
               for handler in resources_of_type(template, "Custom::S3AutoDeleteObjects").values()}
    others = set(resources_of_type(template, "AWS::S3::Bucket")) - {log_bucket}
    assert emptied == others and len(others) == 2
    assert {template["Resources"][bucket]["DeletionPolicy"] for bucket in others} == {"Delete"}
