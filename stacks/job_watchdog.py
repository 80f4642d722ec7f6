"""The stalled-job watchdog: a Lambda that EventBridge runs on a schedule to stop the project's training jobs whose
logs have been silent for too long (lambda/watchdog), so a hung job bills minutes, not until its max_runtime."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from constructs import Construct

from stacks.compliance import acknowledge_wildcards, skip_checkov
from stacks.function_names import TRAINING_LOG_GROUP
from stacks.function_names import WATCHDOG_SERVICE_NAME as POWERTOOLS_SERVICE_NAME
from stacks.project_function import add_project_function

# A sweep lists the project's running jobs and reads a few log streams of each: seconds, with room for backoff.
TIMEOUT_SECONDS = 120
# What each sweep puts out, in the project's namespace with its `service` dimension (Powertools' EMF): how many running
# jobs it could not check (job_watchdog/metric_names.py's JOBS_UNCHECKED; a test holds the two equal).
UNCHECKED_JOBS_METRIC = "TrainingJobsUnchecked"


def watchdog_environment(*, project_prefix: str, stall_minutes: int, notification_topic_arn: str) -> dict[str, str]:
    """Every variable lambda/watchdog reads (job_watchdog/settings.py), and nothing else."""
    return {
        "PROJECT_PREFIX": project_prefix,
        "STALL_SECONDS": str(stall_minutes * 60),
        "TRAINING_LOG_GROUP": TRAINING_LOG_GROUP,
        "NOTIFICATION_TOPIC_ARN": notification_topic_arn,
        "POWERTOOLS_SERVICE_NAME": POWERTOOLS_SERVICE_NAME,
        "POWERTOOLS_METRICS_NAMESPACE": project_prefix,
        "POWERTOOLS_LOG_LEVEL": "INFO",
    }


class StalledJobWatchdog(Construct):
    """The watchdog function, its schedule, role, logs and queue, and the metric of the jobs its sweeps could not
    check (one datapoint a sweep, over one schedule period)."""

    def __init__(self, scope: Construct, construct_id: str, *, asset_dir: Path, project_prefix: str,
                 stall_minutes: int, check_every_minutes: int, topic: sns.ITopic, key: kms.IKey | None,
                 environment_key: kms.IKey, log_retention_days: int, removal_policy: RemovalPolicy) -> None:
        super().__init__(scope, construct_id)
        parts = add_project_function(
            self, name="watchdog", calls="SageMaker, CloudWatch Logs, SNS",
            role_description="The stalled-job watchdog Lambda",
            description="Stops the project's training jobs whose logs have been silent too long",
            asset_dir=asset_dir, environment=watchdog_environment(
                project_prefix=project_prefix, stall_minutes=stall_minutes,
                notification_topic_arn=topic.topic_arn),
            environment_key=environment_key, key=key, timeout_seconds=TIMEOUT_SECONDS, reserved_concurrency=None,
            # A failed sweep is not retried: the next one, a period later, looks again; its event is dead-lettered.
            retry_attempts=0, max_event_age_seconds=check_every_minutes * 60,
            log_retention_days=log_retention_days, removal_policy=removal_policy)
        self.dead_letter_queue, self.log_group, self.role, self.function = (
            parts.dead_letter_queue, parts.log_group, parts.role, parts.function)
        skip_checkov(self.function.node.default_child, "CKV_AWS_115",
                     "One invocation per schedule period; reserving concurrency would take it from every other "
                     "function of the account and fail to deploy where the account's quota is low.")
        self.unchecked_jobs = cloudwatch.Metric(
            namespace=project_prefix, metric_name=UNCHECKED_JOBS_METRIC,
            dimensions_map={"service": POWERTOOLS_SERVICE_NAME}, statistic="Maximum",
            period=Duration.minutes(check_every_minutes))
        self.schedule_rule = events.Rule(
            self, "ScheduleRule",
            description=f"Every {check_every_minutes} min: stop {project_prefix} training jobs whose logs have been "
                        f"silent for {stall_minutes} min",
            schedule=events.Schedule.rate(Duration.minutes(check_every_minutes)),
            targets=[parts.rule_target()],
        )
        self._grant(project_prefix=project_prefix, topic=topic)

    def _grant(self, *, project_prefix: str, topic: sns.ITopic) -> None:
        stack = Stack.of(self)
        training_jobs = f"arn:{stack.partition}:sagemaker:{stack.region}:{stack.account}:training-job/{project_prefix}-*"
        log_group = f"arn:{stack.partition}:logs:{stack.region}:{stack.account}:log-group:{TRAINING_LOG_GROUP}"
        project_streams = f"{log_group}:log-stream:{project_prefix}-*"
        self.log_group.grant_write(self.role)
        topic.grant_publish(self.role)
        self.role.add_to_policy(iam.PolicyStatement(
            sid="ListTrainingJobs",
            actions=["sagemaker:ListTrainingJobs"],
            resources=["*"],  # SageMaker's List* calls take no resource-level permission
        ))
        self.role.add_to_policy(iam.PolicyStatement(
            sid="StopProjectTrainingJobs",
            actions=["sagemaker:DescribeTrainingJob", "sagemaker:StopTrainingJob"],
            resources=[training_jobs],
        ))
        self.role.add_to_policy(iam.PolicyStatement(
            sid="ListTrainingLogStreams",
            actions=["logs:DescribeLogStreams"],
            # The log group's ARN as the Service Authorization Reference writes it, and as CloudWatch Logs' own
            # policy examples write it for group-level actions (with `:*`).
            resources=[log_group, f"{log_group}:*"],
        ))
        self.role.add_to_policy(iam.PolicyStatement(
            sid="ReadProjectTrainingLogs",
            actions=["logs:GetLogEvents"],
            resources=[project_streams],
        ))
        acknowledge_wildcards(
            self.role,
            reason="The watchdog lists training jobs (ListTrainingJobs has no resource-level permission) and then "
                   "describes and stops only jobs named with the project prefix, lists the streams of SageMaker's "
                   "training log group only, reads only the streams of the project's jobs "
                   "(`<job name>/algo-<n>-<epoch>`), and uses the project key for its queue and the topic "
                   "(kms:GenerateDataKey*, kms:ReEncrypt*).",
            actions=["kms:GenerateDataKey*", "kms:ReEncrypt*"],
            resources=["*", training_jobs, f"{log_group}:*", project_streams],
        )
