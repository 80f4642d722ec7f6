"""CloudWatch alarms that page the notification topic."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_events as events
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from stacks.job_watchdog import StalledJobWatchdog
from stacks.notifications import allow_publishing


class PipelineAlarms(Construct):
    """Failed training jobs, trigger, registrar or watchdog events that ended in their dead-letter queues, and running
    jobs the watchdog could not check.

    Each alarm notifies the topic when it enters ALARM, and not again while it stays there: CloudWatch performs an
    alarm's SNS action only on a state transition, "not performed again if the condition persists for hours or days"
    (Amazon CloudWatch, Alarm actions)."""

    def __init__(self, scope: Construct, construct_id: str, *, job_failed_rule: events.IRule,
                 dead_letter_queue: sqs.IQueue, registration_dead_letter_queue: sqs.IQueue,
                 watchdog: StalledJobWatchdog | None, topic: sns.ITopic) -> None:
        super().__init__(scope, construct_id)
        failed_jobs = cloudwatch.Metric(
            namespace="AWS/Events", metric_name="MatchedEvents",
            dimensions_map={"RuleName": job_failed_rule.rule_name},
            statistic="Sum", period=Duration.minutes(5),
        )
        self.failed_jobs = cloudwatch.Alarm(
            self, "FailedTrainingJobsAlarm",
            alarm_description="A training job of this project failed: see the job's CloudWatch logs.",
            metric=failed_jobs, threshold=1, evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        self.dead_letters = self._dead_letter_alarm(
            "TriggerDeadLettersAlarm", dead_letter_queue,
            "Trigger events failed after all retries and wait in the dead-letter queue: read them, fix the cause, "
            "replay them.")
        self.registration_dead_letters = self._dead_letter_alarm(
            "RegistrationDeadLettersAlarm", registration_dead_letter_queue,
            "Completed jobs whose models could not be registered after all retries wait in the registrar's "
            "dead-letter queue: read them, fix the cause, replay them.")
        alarms = [self.failed_jobs, self.dead_letters, self.registration_dead_letters]
        self.watchdog_dead_letters = self.watchdog_unchecked_jobs = None
        if watchdog is not None:
            self.watchdog_dead_letters = self._dead_letter_alarm(
                "WatchdogDeadLettersAlarm", watchdog.dead_letter_queue,
                "Stalled-job watchdog sweeps failed and wait in its dead-letter queue: until the cause is fixed, a "
                "hung training job may bill unnoticed until its max_runtime. Read the records (the next sweep runs "
                "on schedule by itself).")
            # Missing data (no sweep reported in a period) says nothing about the jobs: the alarm keeps its state,
            # rather than passing through OK and notifying again when the next sweep finds the same job unchecked.
            self.watchdog_unchecked_jobs = cloudwatch.Alarm(
                self, "WatchdogUncheckedJobsAlarm",
                alarm_description="The stalled-job watchdog could not check a running training job (a call still "
                                  "throttled or denied after its retries, or a log stream it could not read): a hung "
                                  "job among those may bill until its max_runtime. The watchdog's log names each job "
                                  "and why ('training job not checked'); the alarm returns to OK when a sweep checks "
                                  "every job.",
                metric=watchdog.unchecked_jobs, threshold=1, evaluation_periods=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.IGNORE,
            )
            alarms += [self.watchdog_dead_letters, self.watchdog_unchecked_jobs]
        for alarm in alarms:
            alarm.add_alarm_action(actions.SnsAction(topic))
        allow_publishing(topic, service="cloudwatch.amazonaws.com", source_arns=[alarm.alarm_arn for alarm in alarms])

    def _dead_letter_alarm(self, construct_id: str, queue: sqs.IQueue, description: str) -> cloudwatch.Alarm:
        return cloudwatch.Alarm(
            self, construct_id,
            alarm_description=description,
            metric=queue.metric_approximate_number_of_messages_visible(period=Duration.minutes(5),
                                                                       statistic="Maximum"),
            threshold=1, evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
