"""The project's S3 buckets: data in, artifacts out, and the access-log bucket both write to."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from stacks.compliance import acknowledge, skip_checkov

# SageMaker writes these prefixes of the artifacts bucket.
MODEL_PREFIX = "models/"
CHECKPOINT_PREFIX = "checkpoints/"


class ProjectBuckets(Construct):
    """Versioned, private, TLS-only, encrypted, access-logged buckets with lifecycle rules."""

    def __init__(self, scope: Construct, construct_id: str, *, key: kms.IKey | None, removal_policy: RemovalPolicy,
                 noncurrent_version_expiration_days: int, access_log_retention_days: int) -> None:
        super().__init__(scope, construct_id)
        self._noncurrent_days = noncurrent_version_expiration_days
        # S3 server access logs cannot be delivered to a KMS (customer key) encrypted bucket: SSE-S3 here.
        # S3 delivers access logs late and best-effort, the logs of a teardown's own deletes among them, so a log
        # bucket emptied at teardown can refill before CloudFormation deletes it (BucketNotEmpty). It is never
        # deleted with the stack and empties itself instead: logs expire after their retention.
        self.access_logs = s3.Bucket(
            self, "AccessLogBucket",
            encryption=s3.BucketEncryption.S3_MANAGED,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            **self._common_settings(RemovalPolicy.RETAIN),
            lifecycle_rules=[*self._lifecycle_rules(), s3.LifecycleRule(
                id="ExpireAccessLogs", expiration=Duration.days(access_log_retention_days)), s3.LifecycleRule(
                id="RemoveExpiredLogDeleteMarkers", expired_object_delete_marker=True)],
        )
        acknowledge(self.access_logs, "AwsSolutions-S1",
                    "This is the access-log bucket itself: logging it into itself would loop, and a further log "
                    "bucket would only move the question one bucket along.")
        skip_checkov(self.access_logs.node.default_child, "CKV_AWS_18",
                     "This is the access-log bucket itself (see AwsSolutions-S1).")
        encryption = s3.BucketEncryption.KMS if key else s3.BucketEncryption.S3_MANAGED
        # Datasets arrive as S3 events on EventBridge: the trigger rule listens there, not on bucket notifications.
        self.data = s3.Bucket(
            self, "TrainingDataBucket",
            encryption=encryption, encryption_key=key, bucket_key_enabled=key is not None,
            event_bridge_enabled=True,
            server_access_logs_bucket=self.access_logs, server_access_logs_prefix="data-bucket/",
            **self._common_settings(removal_policy), lifecycle_rules=self._lifecycle_rules(),
        )
        self._acknowledge_notifications_handler()
        self.artifacts = s3.Bucket(
            self, "ArtifactsBucket",
            encryption=encryption, encryption_key=key, bucket_key_enabled=key is not None,
            server_access_logs_bucket=self.access_logs, server_access_logs_prefix="artifacts-bucket/",
            **self._common_settings(removal_policy), lifecycle_rules=self._lifecycle_rules(),
        )

    def _acknowledge_notifications_handler(self) -> None:
        # event_bridge_enabled is applied by a CDK-provided Lambda (one per stack) with AWS's basic execution policy.
        stack = Stack.of(self)
        handler = next(child for child in stack.node.children if child.node.id.startswith("BucketNotificationsHandler"))
        acknowledge(handler, "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
                             "AWSLambdaBasicExecutionRole]",
                    "CDK's own bucket-notifications handler runs once at deployment to switch on EventBridge "
                    "delivery; AWSLambdaBasicExecutionRole only lets it write its own logs.")

    @staticmethod
    def _common_settings(removal_policy: RemovalPolicy) -> dict:
        return {
            "versioned": True,
            "block_public_access": s3.BlockPublicAccess.BLOCK_ALL,
            "enforce_ssl": True,
            "minimum_tls_version": 1.2,
            "removal_policy": removal_policy,
            "auto_delete_objects": removal_policy == RemovalPolicy.DESTROY,
        }

    def _lifecycle_rules(self) -> list[s3.LifecycleRule]:
        return [s3.LifecycleRule(
            id="ExpireOldVersionsAndAbortUploads",
            abort_incomplete_multipart_upload_after=Duration.days(7),
            noncurrent_version_expiration=Duration.days(self._noncurrent_days),
        )]
