"""What the stateful stack hands the stateless one, through exports with names we choose.

Explicit, named exports (instead of CDK's automatic cross-stack references) keep the stateless stack free to
change without CloudFormation refusing to drop an export still in use, and give every imported ARN a stable,
readable name in policies and in cdk-nag's findings.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import CfnOutput, Fn, Stack
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct


@dataclass(frozen=True)
class SharedResources:
    """The stateful resources as the stateless stack sees them."""

    key: kms.IKey
    data_bucket: s3.IBucket
    artifacts_bucket: s3.IBucket
    repository: ecr.IRepository


def export_name(export_prefix: str, attribute: str) -> str:
    return f"{export_prefix}-{attribute}"


def export_shared_resources(stack: Stack, *, export_prefix: str, key: kms.IKey, data_bucket: s3.IBucket,
                            artifacts_bucket: s3.IBucket, repository: ecr.IRepository) -> None:
    values = {
        "KeyArn": key.key_arn,
        "DataBucketName": data_bucket.bucket_name, "DataBucketArn": data_bucket.bucket_arn,
        "ArtifactsBucketName": artifacts_bucket.bucket_name, "ArtifactsBucketArn": artifacts_bucket.bucket_arn,
        "ImageRepositoryName": repository.repository_name, "ImageRepositoryArn": repository.repository_arn,
    }
    for attribute, value in values.items():
        CfnOutput(stack, attribute, value=value, export_name=export_name(export_prefix, attribute))


def import_shared_resources(scope: Construct, *, export_prefix: str, data_encrypted_with_key: bool
                            ) -> SharedResources:
    def imported(attribute: str) -> str:
        return Fn.import_value(export_name(export_prefix, attribute))

    key = kms.Key.from_key_arn(scope, "ProjectKey", imported("KeyArn"))
    data_key = key if data_encrypted_with_key else None
    return SharedResources(
        key=key,
        data_bucket=s3.Bucket.from_bucket_attributes(scope, "TrainingDataBucket", bucket_arn=imported("DataBucketArn"),
                                                     bucket_name=imported("DataBucketName"), encryption_key=data_key),
        artifacts_bucket=s3.Bucket.from_bucket_attributes(scope, "ArtifactsBucket",
                                                          bucket_arn=imported("ArtifactsBucketArn"),
                                                          bucket_name=imported("ArtifactsBucketName"),
                                                          encryption_key=data_key),
        repository=ecr.Repository.from_repository_attributes(scope, "TrainingImageRepository",
                                                             repository_arn=imported("ImageRepositoryArn"),
                                                             repository_name=imported("ImageRepositoryName")),
    )
