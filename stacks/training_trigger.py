"""The trigger Lambda, its role, its dead-letter queue and the EventBridge rules that invoke it."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from stacks.config import LOG_RETENTION_DAYS
from stacks.compliance import acknowledge, acknowledge_wildcards, skip_checkov

HANDLER = "handler.lambda_handler"
RUNTIME = lambda_.Runtime.PYTHON_3_14
TRAINING_JOB_ACTIONS = ["sagemaker:CreateTrainingJob", "sagemaker:DescribeTrainingJob", "sagemaker:AddTags"]


def marker_created_pattern(*, bucket_name: str, dataset_prefix: str, marker_names: tuple[str, ...]
                           ) -> events.EventPattern:
    """S3 `Object Created` for `<dataset_prefix>.../<marker>` in the data bucket."""
    return events.EventPattern(
        source=["aws.s3"],
        detail_type=["Object Created"],
        detail={"bucket": {"name": [bucket_name]},
                "object": {"key": events.Match.any_of(
                    *(events.Match.wildcard(f"{dataset_prefix}*/{marker}") for marker in marker_names))}},
    )


class TrainingTrigger(Construct):
    """Turns marker uploads (and the optional schedule) into CreateTrainingJob calls."""

    def __init__(self, scope: Construct, construct_id: str, *, asset_dir: Path, environment: dict[str, str],
                 data_bucket: s3.IBucket, dataset_prefix: str, marker_names: tuple[str, ...],
                 project_prefix: str, execution_role: iam.IRole, topic: sns.ITopic, key: kms.IKey | None,
                 environment_key: kms.IKey,
                 reserved_concurrency: int, timeout_seconds: int, retry_attempts: int, max_event_age_seconds: int,
                 log_retention_days: int, retrain_schedule: str | None, removal_policy: RemovalPolicy) -> None:
        super().__init__(scope, construct_id)
        self.dead_letter_queue = sqs.Queue(
            self, "DeadLetterQueue",
            encryption=sqs.QueueEncryption.KMS if key else sqs.QueueEncryption.SQS_MANAGED,
            encryption_master_key=key,
            enforce_ssl=True,
            retention_period=Duration.days(14),
        )
        acknowledge(self.dead_letter_queue, "AwsSolutions-SQS3",
                    "This queue is the trigger's dead-letter queue (its on-failure destination); nothing sits behind "
                    "a dead-letter queue, and the alarm on its depth pages the team.")
        self.log_group = logs.LogGroup(
            self, "LogGroup",
            retention=log_retention(log_retention_days),
            encryption_key=key,
            removal_policy=removal_policy,
        )
        self.role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                             description="The training trigger Lambda")
        self.function = lambda_.Function(
            self, "Function",
            code=lambda_.Code.from_asset(str(asset_dir)),
            handler=HANDLER,
            runtime=RUNTIME,
            architecture=lambda_.Architecture.ARM_64,
            role=self.role,
            environment=environment,
            environment_encryption=environment_key,
            timeout=Duration.seconds(timeout_seconds),
            memory_size=256,
            reserved_concurrent_executions=reserved_concurrency,
            log_group=self.log_group,
            logging_format=lambda_.LoggingFormat.JSON,
            description="Starts a SageMaker training job when a dataset version is complete",
        )
        function_resource = self.function.node.default_child
        skip_checkov(function_resource, "CKV_AWS_116",
                     "Failed asynchronous invocations go to the on-failure destination (the encrypted SQS queue "
                     "above), which records the request, the error and the response; a DeadLetterConfig would "
                     "deliver the same events a second time.")
        skip_checkov(function_resource, "CKV_AWS_117",
                     "The trigger calls only AWS APIs (S3, SageMaker, SNS) and reaches no private network; a VPC "
                     "would need NAT or interface endpoints and add cost without reducing exposure.")
        self.function.configure_async_invoke(
            retry_attempts=retry_attempts,
            max_event_age=Duration.seconds(max_event_age_seconds),
            on_failure=destinations.SqsDestination(self.dead_letter_queue),
        )
        self._grant(data_bucket=data_bucket, dataset_prefix=dataset_prefix, project_prefix=project_prefix,
                    execution_role=execution_role, topic=topic)
        self.marker_rule = events.Rule(
            self, "DatasetMarkerRule",
            description="A dataset version is complete: its marker object was created",
            event_pattern=marker_created_pattern(bucket_name=data_bucket.bucket_name, dataset_prefix=dataset_prefix,
                                                 marker_names=marker_names),
            targets=[self._target()],
        )
        self.schedule_rule = None
        if retrain_schedule:
            # The target gets EventBridge's own `Scheduled Event`, which the trigger reads as "train on the newest".
            self.schedule_rule = events.Rule(
                self, "RetrainScheduleRule",
                description="Periodic retraining on the newest complete dataset version",
                schedule=events.Schedule.expression(retrain_schedule),
                targets=[self._target()],
            )

    def _target(self) -> targets.LambdaFunction:
        # EventBridge invokes asynchronously: the function's retries and on-failure queue apply after its own.
        return targets.LambdaFunction(self.function, retry_attempts=2, max_event_age=Duration.hours(2),
                                      dead_letter_queue=self.dead_letter_queue)

    def _grant(self, *, data_bucket: s3.IBucket, dataset_prefix: str, project_prefix: str,
               execution_role: iam.IRole, topic: sns.ITopic) -> None:
        stack = Stack.of(self)
        training_jobs = (f"arn:{stack.partition}:sagemaker:{stack.region}:{stack.account}:"
                         f"training-job/{project_prefix}-*")
        self.log_group.grant_write(self.role)
        data_bucket.grant_read(self.role, f"{dataset_prefix}*")
        topic.grant_publish(self.role)
        self.role.add_to_policy(iam.PolicyStatement(
            sid="StartProjectTrainingJobs",
            actions=TRAINING_JOB_ACTIONS,
            resources=[training_jobs],
        ))
        self.role.add_to_policy(iam.PolicyStatement(
            sid="PassExecutionRoleToSageMaker",
            actions=["iam:PassRole"],
            resources=[execution_role.role_arn],
            conditions={"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}},
        ))
        acknowledge_wildcards(
            self.role,
            reason="The trigger reads objects under the dataset prefix only (read grant: s3:GetObject*, "
                   "s3:GetBucket*, s3:List*), starts training jobs whose names begin with the project prefix "
                   "(names are unique per dataset version), and uses the project key for the encrypted queue "
                   "and topic (kms:GenerateDataKey*, kms:ReEncrypt*).",
            actions=["s3:GetObject*", "s3:GetBucket*", "s3:List*", "kms:GenerateDataKey*", "kms:ReEncrypt*"],
            resources=[data_bucket.arn_for_objects(f"{dataset_prefix}*"), training_jobs],
        )


def log_retention(days: int) -> logs.RetentionDays:
    # RetentionDays lists CloudWatch's allowed periods in ascending order, as LOG_RETENTION_DAYS does (then INFINITE).
    return dict(zip(LOG_RETENTION_DAYS, logs.RetentionDays))[days]
