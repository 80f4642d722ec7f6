"""The trigger Lambda, its role, its dead-letter queue and the EventBridge rules that invoke it."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from constructs import Construct

from stacks.compliance import acknowledge_wildcards, skip_checkov
from stacks.project_function import add_project_function

TRAINING_JOB_ACTIONS = ["sagemaker:CreateTrainingJob", "sagemaker:DescribeTrainingJob", "sagemaker:AddTags"]
# Creating a tagged tuning job needs AddTags on it too; SageMaker itself starts its trials (as the passed role). A
# warm start's parents are described first, to check they trained on the job's dataset (warm_start.py).
TUNING_JOB_ACTIONS = ["sagemaker:CreateHyperParameterTuningJob", "sagemaker:AddTags",
                      "sagemaker:DescribeHyperParameterTuningJob"]


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
    """Turns marker uploads (and the optional schedule) into CreateTrainingJob (or CreateHyperParameterTuningJob)
    calls."""

    def __init__(self, scope: Construct, construct_id: str, *, asset_dir: Path, environment: dict[str, str],
                 data_bucket: s3.IBucket, dataset_prefix: str, marker_names: tuple[str, ...],
                 project_prefix: str, execution_role: iam.IRole, topic: sns.ITopic, key: kms.IKey | None,
                 environment_key: kms.IKey,
                 reserved_concurrency: int | None, timeout_seconds: int, retry_attempts: int, max_event_age_seconds: int,
                 log_retention_days: int, retrain_schedule: str | None, removal_policy: RemovalPolicy) -> None:
        super().__init__(scope, construct_id)
        parts = add_project_function(
            self, name="trigger", calls="S3, SageMaker, SNS", role_description="The training trigger Lambda",
            description="Starts a SageMaker training (or tuning) job when a dataset version is complete", asset_dir=asset_dir,
            environment=environment, environment_key=environment_key, key=key, timeout_seconds=timeout_seconds,
            reserved_concurrency=reserved_concurrency, retry_attempts=retry_attempts,
            max_event_age_seconds=max_event_age_seconds, log_retention_days=log_retention_days,
            removal_policy=removal_policy)
        self.dead_letter_queue, self.log_group, self.role, self.function = (
            parts.dead_letter_queue, parts.log_group, parts.role, parts.function)
        if reserved_concurrency is None:
            skip_checkov(self.function.node.default_child, "CKV_AWS_115",
                         "Reserved concurrency is opt-in (trigger_reserved_concurrency): Lambda keeps 100 of an "
                         "account's concurrency unreserved, so a reservation fails to deploy where the account's "
                         "quota is low; each invocation starts at most one job per marker, and the cost ceilings "
                         "bound every job.")
        self._grant(data_bucket=data_bucket, dataset_prefix=dataset_prefix, project_prefix=project_prefix,
                    execution_role=execution_role, topic=topic)
        self.marker_rule = events.Rule(
            self, "DatasetMarkerRule",
            description="A dataset version is complete: its marker object was created",
            event_pattern=marker_created_pattern(bucket_name=data_bucket.bucket_name, dataset_prefix=dataset_prefix,
                                                 marker_names=marker_names),
            targets=[parts.rule_target()],
        )
        self.schedule_rule = None
        if retrain_schedule:
            # The target gets EventBridge's own `Scheduled Event`, which the trigger reads as "train on the newest".
            self.schedule_rule = events.Rule(
                self, "RetrainScheduleRule",
                description="Periodic retraining on the newest complete dataset version",
                schedule=events.Schedule.expression(retrain_schedule),
                targets=[parts.rule_target()],
            )

    def _grant(self, *, data_bucket: s3.IBucket, dataset_prefix: str, project_prefix: str,
               execution_role: iam.IRole, topic: sns.ITopic) -> None:
        stack = Stack.of(self)
        arn = f"arn:{stack.partition}:sagemaker:{stack.region}:{stack.account}"
        training_jobs = f"{arn}:training-job/{project_prefix}-*"
        tuning_jobs = f"{arn}:hyper-parameter-tuning-job/{project_prefix}-*"
        self.log_group.grant_write(self.role)
        data_bucket.grant_read(self.role, f"{dataset_prefix}*")
        topic.grant_publish(self.role)
        self.role.add_to_policy(iam.PolicyStatement(
            sid="StartProjectTrainingJobs",
            actions=TRAINING_JOB_ACTIONS,
            resources=[training_jobs],
        ))
        self.role.add_to_policy(iam.PolicyStatement(
            sid="StartProjectTuningJobs",
            actions=TUNING_JOB_ACTIONS,
            resources=[tuning_jobs],
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
                   "s3:GetBucket*, s3:List*), starts training and tuning jobs whose names begin with the project "
                   "prefix (names are unique per dataset version), and uses the project key for the encrypted queue "
                   "and topic (kms:GenerateDataKey*, kms:ReEncrypt*).",
            actions=["s3:GetObject*", "s3:GetBucket*", "s3:List*", "kms:GenerateDataKey*", "kms:ReEncrypt*"],
            resources=[data_bucket.arn_for_objects(f"{dataset_prefix}*"), training_jobs, tuning_jobs],
        )

