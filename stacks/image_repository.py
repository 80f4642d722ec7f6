"""The ECR repository for the custom training image (training_code/Dockerfile)."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_kms as kms
from constructs import Construct


class TrainingImageRepository(Construct):
    """Scan on push, immutable tags, encrypted, and only the newest images kept."""

    def __init__(self, scope: Construct, construct_id: str, *, key: kms.IKey | None, removal_policy: RemovalPolicy,
                 images_to_keep: int) -> None:
        super().__init__(scope, construct_id)
        self.repository = ecr.Repository(
            self, "TrainingImageRepository",
            image_scan_on_push=True,
            image_tag_mutability=ecr.TagMutability.IMMUTABLE,
            encryption=ecr.RepositoryEncryption.KMS if key else ecr.RepositoryEncryption.AES_256,
            encryption_key=key,
            removal_policy=removal_policy,
            empty_on_delete=removal_policy == RemovalPolicy.DESTROY,
            lifecycle_rules=[ecr.LifecycleRule(
                description=f"keep the newest {images_to_keep} images",
                max_image_count=images_to_keep,
            )],
        )
