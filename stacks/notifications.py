"""Where people hear about training jobs: an encrypted SNS topic fed by SageMaker's job state changes."""

from __future__ import annotations

from collections.abc import Sequence

import jsii
from aws_cdk import Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

TERMINAL_JOB_STATES = ("Completed", "Failed", "Stopped")
# The hyperparameter SageMaker adds to every training job a tuning job starts (its objective metric's name): the
# SageMaker SDK calls it "reserved by SageMaker for tuning jobs" (sagemaker/tuner.py) and the training toolkit keeps it
# from scripts (sagemaker_training/params.py). The `Training Job State Change` event carries the job's HyperParameters
# but no TuningJobArn (AWS's sample event, and EventBridge's schema of it), so this key is what marks a trial there.
TUNING_TRIAL_HYPERPARAMETER = "_tuning_objective_metric"


def training_job_state_pattern(project_prefix: str, states: tuple[str, ...]) -> events.EventPattern:
    """SageMaker's `Training Job State Change` events for this project's jobs (`<prefix>-*`) in `states`, tuning
    trials left out: a tuning job's own event speaks for its trials (it counts them by status), and the registrar
    registers its best trial when the tuning job completes."""
    return events.EventPattern(
        source=["aws.sagemaker"],
        detail_type=["SageMaker Training Job State Change"],
        detail={"TrainingJobName": events.Match.prefix(f"{project_prefix}-"), "TrainingJobStatus": list(states),
                "HyperParameters": {TUNING_TRIAL_HYPERPARAMETER: events.Match.does_not_exist()}},
    )


def tuning_job_state_pattern(project_prefix: str, states: tuple[str, ...]) -> events.EventPattern:
    """SageMaker's `HyperParameter Tuning Job State Change` events for this project's tuning jobs in `states`."""
    return events.EventPattern(
        source=["aws.sagemaker"],
        detail_type=["SageMaker HyperParameter Tuning Job State Change"],
        detail={"HyperParameterTuningJobName": events.Match.prefix(f"{project_prefix}-"),
                "HyperParameterTuningJobStatus": list(states)},
    )


def allow_publishing(topic: sns.ITopic, *, service: str, source_arns: Sequence[str]) -> None:
    """Let one AWS service publish to `topic` for these sources of this account, and for nothing else.

    A topic with a policy of its own has no default policy, so every service that publishes needs a statement;
    `aws:SourceAccount` and `aws:SourceArn` keep other accounts' rules and alarms out (the confused-deputy
    conditions of AWS's SNS access-policy examples).
    """
    topic.add_to_resource_policy(iam.PolicyStatement(
        sid=f"PublishFrom{service.split('.')[0].title()}",
        principals=[iam.ServicePrincipal(service)],
        actions=["sns:Publish"],
        resources=[topic.topic_arn],
        conditions={"StringEquals": {"aws:SourceAccount": Stack.of(topic).account},
                    "ArnEquals": {"aws:SourceArn": list(source_arns)}},
    ))


@jsii.implements(events.IRuleTarget)
class _TopicTarget:
    """An SNS topic as a rule target, without the grant `targets.SnsTopic` adds: that one lets
    events.amazonaws.com publish for any rule of any account; `allow_publishing` names the rules instead."""

    def __init__(self, topic: sns.ITopic) -> None:
        self._topic = topic

    def bind(self, _rule: events.IRule, _id: str | None = None) -> events.RuleTargetConfig:
        return events.RuleTargetConfig(arn=self._topic.topic_arn)


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
            description=f"{project_prefix} training jobs (not tuning trials) that finished, failed or stopped",
            event_pattern=training_job_state_pattern(project_prefix, TERMINAL_JOB_STATES),
            targets=[_TopicTarget(self.topic)],
        )
        self.tuning_job_state_rule = events.Rule(
            self, "TuningJobStateRule",
            description=f"{project_prefix} hyperparameter tuning jobs that finished, failed or stopped",
            event_pattern=tuning_job_state_pattern(project_prefix, TERMINAL_JOB_STATES),
            targets=[_TopicTarget(self.topic)],
        )
        allow_publishing(self.topic, service="events.amazonaws.com",
                         source_arns=[self.job_state_rule.rule_arn, self.tuning_job_state_rule.rule_arn])
        # A rule of its own, so that CloudWatch counts failures (AWS/Events MatchedEvents) for the alarm.
        self.job_failed_rule = events.Rule(
            self, "TrainingJobFailedRule",
            description=f"{project_prefix} training jobs (not tuning trials) that failed",
            event_pattern=training_job_state_pattern(project_prefix, ("Failed",)),
        )
