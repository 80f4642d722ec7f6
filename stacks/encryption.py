"""The project's customer-managed KMS key."""

from __future__ import annotations

from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct


class ProjectKey(Construct):
    """A rotating KMS key for data at rest; the AWS services that deliver to our topic and logs may use it."""

    def __init__(self, scope: Construct, construct_id: str, *, project_prefix: str,
                 removal_policy: RemovalPolicy) -> None:
        super().__init__(scope, construct_id)
        self.key = kms.Key(
            self, "Key",
            description=f"{project_prefix}: training data, artifacts, queues, topics and logs",
            enable_key_rotation=True,
            removal_policy=removal_policy,
        )
        stack = Stack.of(self)
        # EventBridge and CloudWatch alarms publish to the encrypted notification topic; SNS cannot deliver from
        # them with an AWS-managed key, only with a customer-managed key that lets them encrypt. SNS does not
        # support aws:SourceAccount / aws:SourceArn in the key policy for EventBridge-to-encrypted-topic delivery
        # (the condition drops every event), so only the alarms' statement carries it; the topic policy limits
        # both services to this stack's rules and alarms.
        for service, conditions in (("events.amazonaws.com", None),
                                    ("cloudwatch.amazonaws.com", {"StringEquals": {"aws:SourceAccount": stack.account}})):
            self.key.add_to_resource_policy(iam.PolicyStatement(
                sid=f"AllowPublishFrom{service.split('.')[0].capitalize()}",
                principals=[iam.ServicePrincipal(service)],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],  # in a key policy, "*" means this key
                conditions=conditions,
            ))
        # CloudWatch Logs encrypts log groups with this key only when the key policy names it.
        self.key.add_to_resource_policy(iam.PolicyStatement(
            sid="AllowCloudWatchLogs",
            principals=[iam.ServicePrincipal(f"logs.{stack.region}.amazonaws.com")],
            actions=["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"],
            resources=["*"],
            conditions={"ArnLike": {
                "kms:EncryptionContext:aws:logs:arn": f"arn:{stack.partition}:logs:{stack.region}:{stack.account}:*"}},
        ))
