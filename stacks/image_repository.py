"""The ECR repository for the custom training image (training_code/Dockerfile)."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_kms as kms
from constructs import Construct


class TrainingImageRepository(Construct):
    """Scan on push, immutable tags, encrypted, and only the newest images kept, never the one the jobs pin."""

    def __init__(self, scope: Construct, construct_id: str, *, key: kms.IKey | None, removal_policy: RemovalPolicy,
                 images_to_keep: int, pinned_tag: str | None) -> None:
        super().__init__(scope, construct_id)
        self.repository = ecr.Repository(
            self, "TrainingImageRepository",
            image_scan_on_push=True,
            image_tag_mutability=ecr.TagMutability.IMMUTABLE,
            encryption=ecr.RepositoryEncryption.KMS if key else ecr.RepositoryEncryption.AES_256,
            encryption_key=key,
            removal_policy=removal_policy,
            empty_on_delete=removal_policy == RemovalPolicy.DESTROY,
            lifecycle_rules=[*_pinned_tag_rules(pinned_tag), ecr.LifecycleRule(
                description=f"keep the newest {images_to_keep} images",
                max_image_count=images_to_keep,
            )],
        )


def _pinned_tag_rules(pinned_tag: str | None) -> list[ecr.LifecycleRule]:
    """A first rule that selects the pinned image and never expires it.

    ECR never lets a later rule expire an image that matched an earlier rule's tag selection. Tags are immutable,
    so the pattern (the tag itself, no wildcard) selects one image, and "more than 1" never holds for it.
    """
    if pinned_tag is None:
        return []
    return [ecr.LifecycleRule(
        rule_priority=1,
        description=f"never expire {pinned_tag}, the tag the trigger's jobs run (custom_image_tag)",
        tag_status=ecr.TagStatus.TAGGED,
        tag_pattern_list=[pinned_tag],
        max_image_count=1,
    )]
