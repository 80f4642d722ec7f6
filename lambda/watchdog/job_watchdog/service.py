"""One sweep, whatever invoked it (the schedule, or a person): every running job of the project is checked, and a
stalled one is stopped and the team told which host fell silent when.

Idempotent: a stopped job reads Stopping, which ListTrainingJobs' InProgress filter leaves out, so the next sweep
neither stops nor reports it again; a sweep that finds SageMaker refusing the stop (another sweep or a person was
first) reports nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from job_watchdog.jobs_and_logs import JobsAndLogs
from job_watchdog.observability import logger, metrics
from job_watchdog.settings import Settings, load_settings
from job_watchdog.stall import assess, training_since

JOBS_CHECKED = "TrainingJobsChecked"
STALLED_JOBS_STOPPED = "StalledJobsStopped"


def handle_event(event: Mapping[str, Any], settings: Settings | None = None, jobs: JobsAndLogs | None = None,
                 now: datetime | None = None) -> dict[str, Any]:
    settings = settings or load_settings()
    jobs = jobs or JobsAndLogs(settings.training_log_group)
    now = now or datetime.now(timezone.utc)
    outcomes = [check_job(name, jobs, settings, now) for name in jobs.running_jobs(settings.project_prefix)]
    stopped = [outcome["job_name"] for outcome in outcomes if outcome["outcome"] == "stopped"]
    metrics.add_metric(name=JOBS_CHECKED, unit=MetricUnit.Count, value=len(outcomes))
    metrics.add_metric(name=STALLED_JOBS_STOPPED, unit=MetricUnit.Count, value=len(stopped))
    return {"checked": len(outcomes), "stopped": stopped, "jobs": outcomes}


def check_job(job_name: str, jobs: JobsAndLogs, settings: Settings, now: datetime) -> dict[str, Any]:
    description = jobs.describe(job_name)
    if training_since(description) is None:
        return {"job_name": job_name, "outcome": "not training", "secondary_status": description["SecondaryStatus"]}
    # The cheapest evidence first: a job that entered Training lately needs no log read, one whose streams the listing
    # shows active needs no stream read (the listing's times lag, never lead); only silence is read back from the
    # streams themselves before the job is stopped.
    stall = assess(description, {}, now, settings.stall)
    if stall is not None:
        listed = jobs.listed_streams(job_name)
        stall = assess(description, listed, now, settings.stall)
        if stall is not None:
            stall = assess(description, {stream: jobs.newest_line(stream) for stream in listed}, now, settings.stall)
    if stall is None:
        return {"job_name": job_name, "outcome": "making progress"}
    if not jobs.stop(job_name):
        logger.info("stalled job no longer stoppable", extra={"job_name": job_name})
        return {"job_name": job_name, "outcome": "already stopping"}
    message = stall.notification(now, settings.training_log_group)
    logger.warning("stalled training job stopped", extra=message)
    jobs.notify(settings.notification_topic_arn, stall.subject(), message)
    return {**message, "outcome": "stopped"}
