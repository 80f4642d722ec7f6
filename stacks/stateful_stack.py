"""Everything that holds data or identity and must survive a redeploy: key, buckets, image repository."""

from __future__ import annotations

from typing import Any

from aws_cdk import RemovalPolicy, Stack
from constructs import Construct

from stacks.buckets import ProjectBuckets
from stacks.config import PipelineConfig
from stacks.encryption import ProjectKey
from stacks.image_repository import TrainingImageRepository
from stacks.shared_resources import export_shared_resources


def removal_policy_of(config: PipelineConfig) -> RemovalPolicy:
    return RemovalPolicy.RETAIN if config.removal_policy == "retain" else RemovalPolicy.DESTROY


class StatefulStack(Stack):
    """KMS key, data/artifacts/access-log buckets and the ECR repository; termination-protected in prod."""

    def __init__(self, scope: Construct, construct_id: str, *, config: PipelineConfig, export_prefix: str,
                 **kwargs: Any) -> None:
        super().__init__(scope, construct_id, termination_protection=config.is_production, **kwargs)
        removal_policy = removal_policy_of(config)
        key = ProjectKey(self, "Encryption", project_prefix=config.project_prefix, removal_policy=removal_policy).key
        data_key = key if config.enable_kms else None
        buckets = ProjectBuckets(self, "Buckets", key=data_key, removal_policy=removal_policy,
                                 noncurrent_version_expiration_days=config.noncurrent_version_expiration_days,
                                 access_log_retention_days=config.log_retention_days)
        pinned_tag = config.custom_image_tag if config.image_source == "custom" else None
        repository = TrainingImageRepository(self, "ImageRepository", key=data_key, removal_policy=removal_policy,
                                             images_to_keep=config.ecr_images_to_keep, pinned_tag=pinned_tag).repository
        export_shared_resources(self, export_prefix=export_prefix, key=key, data_bucket=buckets.data,
                                artifacts_bucket=buckets.artifacts, repository=repository)
