"""Where people hear about training jobs: an encrypted SNS topic fed by SageMaker's job state changes."""

from __future__ import annotations

from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

TERMINAL_JOB_STATES = ("Completed", "Failed", "Stopped")


def training_job_state_pattern(project_prefix: str, states: tuple[str, ...]) -> events.EventPattern:
    """SageMaker's `Training Job State Change` events for this project's jobs (`<prefix>-*`) in `states`."""
    return events.EventPattern(
        source=["aws.sagemaker"],
        detail_type=["SageMaker Training Job State Change"],
        detail={"TrainingJobName": events.Match.prefix(f"{project_prefix}-"), "TrainingJobStatus": list(states)},
    )


class JobNotifications(Construct):
    """The topic (also used by the trigger for rejected input) and the job state rules that publish to it."""

    def __init__(self, scope: Construct, construct_id: str, *, project_prefix: str, key: kms.IKey,
                 notification_email: str | None) -> None:
        super().__init__(scope, construct_id)
        self.topic = sns.Topic(self, "Topic", display_name=f"{project_prefix} training jobs", master_key=key,
                               enforce_ssl=True)
        if notification_email:
            self.topic.add_subscription(subscriptions.EmailSubscription(notification_email))
        self.job_state_rule = events.Rule(
            self, "TrainingJobStateRule",
            description=f"{project_prefix} training jobs that finished, failed or stopped",
            event_pattern=training_job_state_pattern(project_prefix, TERMINAL_JOB_STATES),
            targets=[targets.SnsTopic(self.topic)],
        )
        # A rule of its own, so that CloudWatch counts failures (AWS/Events MatchedEvents) for the alarm.
        self.job_failed_rule = events.Rule(
            self, "TrainingJobFailedRule",
            description=f"{project_prefix} training jobs that failed",
            event_pattern=training_job_state_pattern(project_prefix, ("Failed",)),
        )
