"""What each of the project's Lambdas has: its own role, an encrypted log group and an encrypted dead-letter queue
that receives the events it failed on after Lambda's asynchronous retries."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from stacks.compliance import acknowledge, skip_checkov
from stacks.config import LOG_RETENTION_DAYS

HANDLER = "handler.lambda_handler"
RUNTIME = lambda_.Runtime.PYTHON_3_14


@dataclass(frozen=True)
class ProjectFunction:
    dead_letter_queue: sqs.Queue
    log_group: logs.LogGroup
    role: iam.Role
    function: lambda_.Function

    def rule_target(self) -> targets.LambdaFunction:
        """An EventBridge rule's target: EventBridge invokes asynchronously, so its retries and this queue apply
        before the function's own."""
        return targets.LambdaFunction(self.function, retry_attempts=2, max_event_age=Duration.hours(2),
                                      dead_letter_queue=self.dead_letter_queue)


def add_project_function(scope: Construct, *, name: str, calls: str, role_description: str, description: str,
                         asset_dir: Path, environment: dict[str, str], environment_key: kms.IKey, key: kms.IKey | None,
                         timeout_seconds: int, reserved_concurrency: int | None, retry_attempts: int,
                         max_event_age_seconds: int, log_retention_days: int,
                         removal_policy: RemovalPolicy) -> ProjectFunction:
    """The function `name` (e.g. "trigger") and its parts, as children of `scope`; `calls` lists the AWS APIs it
    uses, for the reason it needs no VPC."""
    dead_letter_queue = sqs.Queue(
        scope, "DeadLetterQueue",
        encryption=sqs.QueueEncryption.KMS if key else sqs.QueueEncryption.SQS_MANAGED,
        encryption_master_key=key,
        enforce_ssl=True,
        retention_period=Duration.days(14),
    )
    acknowledge(dead_letter_queue, "AwsSolutions-SQS3",
                f"This queue is the {name}'s dead-letter queue (its on-failure destination); nothing sits behind "
                "a dead-letter queue, and the alarm on its depth pages the team.")
    log_group = logs.LogGroup(
        scope, "LogGroup",
        retention=log_retention(log_retention_days),
        encryption_key=key,
        removal_policy=removal_policy,
    )
    role = iam.Role(scope, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                    description=role_description)
    function = lambda_.Function(
        scope, "Function",
        code=lambda_.Code.from_asset(str(asset_dir)),
        handler=HANDLER,
        runtime=RUNTIME,
        architecture=lambda_.Architecture.ARM_64,
        role=role,
        environment=environment,
        environment_encryption=environment_key,
        timeout=Duration.seconds(timeout_seconds),
        memory_size=256,
        reserved_concurrent_executions=reserved_concurrency,
        log_group=log_group,
        logging_format=lambda_.LoggingFormat.JSON,
        description=description,
    )
    function_resource = function.node.default_child
    skip_checkov(function_resource, "CKV_AWS_116",
                 "Failed asynchronous invocations go to the on-failure destination (the encrypted SQS queue "
                 "above), which records the request, the error and the response; a DeadLetterConfig would "
                 "deliver the same events a second time.")
    skip_checkov(function_resource, "CKV_AWS_117",
                 f"The {name} calls only AWS APIs ({calls}) and reaches no private network; a VPC "
                 "would need NAT or interface endpoints and add cost without reducing exposure.")
    function.configure_async_invoke(
        retry_attempts=retry_attempts,
        max_event_age=Duration.seconds(max_event_age_seconds),
        on_failure=destinations.SqsDestination(dead_letter_queue),
    )
    return ProjectFunction(dead_letter_queue, log_group, role, function)


def log_retention(days: int) -> logs.RetentionDays:
    # RetentionDays lists CloudWatch's allowed periods in ascending order, as LOG_RETENTION_DAYS does (then INFINITE).
    return dict(zip(LOG_RETENTION_DAYS, logs.RetentionDays))[days]
