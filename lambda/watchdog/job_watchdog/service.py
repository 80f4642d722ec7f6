"""One sweep, whatever invoked it (the schedule, or a person): every running job of the project is checked, and a
stalled one is stopped and the team told which host fell silent when.

Idempotent: a stopped job reads Stopping, which ListTrainingJobs' InProgress filter leaves out, so the next sweep
neither stops nor reports it again; a sweep that finds SageMaker refusing the stop (another sweep or a person was
first) reports nothing.

Each job is checked on its own. A call about one job that still fails after the client's retries (throttled, denied,
timed out) leaves that job `unchecked` in this sweep's result, and the sweep goes on to the others; so does a job
whose newest log line could not be read. Every sweep puts the number of jobs it left unchecked in the
`TrainingJobsUnchecked` metric, whose alarm (stacks/alarms.py) tells the topic once when a sweep first leaves a job
unchecked, not on every sweep. ListTrainingJobs lists jobs in the same order every time, so a sweep starts at a
place drawn from its event's id, and starts no check once the function's time runs low: no job is always checked
after the same others.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from botocore.exceptions import BotoCoreError, ClientError

from job_watchdog.jobs_and_logs import JobsAndLogs
from job_watchdog.metric_names import JOBS_CHECKED, JOBS_UNCHECKED, STALLED_JOBS_STOPPED
from job_watchdog.observability import logger, metrics
from job_watchdog.settings import Settings, load_settings
from job_watchdog.stall import assess, last_lines, training_since

# No check starts with less time left before the function's timeout: one SageMaker call still throttled after its
# six attempts waits up to 31 s between them (aws_clients.SAGEMAKER_RETRIES), and a check makes several calls.
RESERVE_SECONDS = 40


def handle_event(event: Mapping[str, Any], settings: Settings | None = None, jobs: JobsAndLogs | None = None,
                 now: datetime | None = None, remaining_seconds: Callable[[], float] | None = None
                 ) -> dict[str, Any]:
    """`remaining_seconds`: the time left before the function's timeout (the Lambda context's); None: no limit."""
    settings = settings or load_settings()
    jobs = jobs or JobsAndLogs(settings.training_log_group)
    now = now or datetime.now(timezone.utc)
    outcomes = []
    for name in sweep_order(jobs.running_jobs(settings.project_prefix), event):
        if remaining_seconds is not None and remaining_seconds() < RESERVE_SECONDS:
            outcomes.append(_unchecked(name, f"the sweep had less than {RESERVE_SECONDS} s left before its timeout"))
        else:
            outcomes.append(_check_alone(name, jobs, settings, now))
    stopped = [outcome["job_name"] for outcome in outcomes if outcome["outcome"] == "stopped"]
    unchecked = [outcome["job_name"] for outcome in outcomes if outcome["outcome"] == "unchecked"]
    metrics.add_metric(name=JOBS_CHECKED, unit=MetricUnit.Count, value=len(outcomes) - len(unchecked))
    metrics.add_metric(name=STALLED_JOBS_STOPPED, unit=MetricUnit.Count, value=len(stopped))
    metrics.add_metric(name=JOBS_UNCHECKED, unit=MetricUnit.Count, value=len(unchecked))
    return {"checked": len(outcomes) - len(unchecked), "stopped": stopped, "unchecked": unchecked, "jobs": outcomes}


def sweep_order(names: list[str], event: Mapping[str, Any]) -> list[str]:
    """ListTrainingJobs' order, turned to start at a place drawn from the event's id (EventBridge gives every
    scheduled event a new one); an event without an id (a person's invocation) starts at the first job."""
    event_id = event.get("id") if isinstance(event, Mapping) else None
    if not names or not event_id:
        return names
    start = int.from_bytes(hashlib.sha256(str(event_id).encode()).digest()[:8], "big") % len(names)
    return names[start:] + names[:start]


def _check_alone(job_name: str, jobs: JobsAndLogs, settings: Settings, now: datetime) -> dict[str, Any]:
    """`check_job`, with a call about this job that failed reported as its outcome instead of ending the sweep."""
    try:
        return check_job(job_name, jobs, settings, now)
    except ClientError as error:
        details = error.response.get("Error", {})
        return _unchecked(job_name, f"{error.operation_name} failed: {details.get('Code')}: {details.get('Message')}")
    except BotoCoreError as error:
        return _unchecked(job_name, f"{type(error).__name__}: {error}")


def check_job(job_name: str, jobs: JobsAndLogs, settings: Settings, now: datetime) -> dict[str, Any]:
    description = jobs.describe(job_name)
    since = training_since(description)
    if since is None:
        return {"job_name": job_name, "outcome": "not training", "secondary_status": description["SecondaryStatus"]}
    # The cheapest evidence first: a job that entered Training lately needs no log read, one whose streams the listing
    # shows active needs no stream read (the listing's times lag, never lead); only silence is read back from the
    # streams themselves, each from the later of when training began and its listed line.
    stall = assess(description, {}, now, settings.stall)
    if stall is not None:
        listed = jobs.listed_streams(job_name)
        stall = assess(description, listed, now, settings.stall)
        if stall is not None:
            reads = {stream: jobs.newest_line(stream, max(since, listed_at or since))
                     for stream, listed_at in listed.items()}
            known, unknown = last_lines(listed, reads)
            # Without the unknown streams every host looks at least as silent as it is: a job that is not stalled on
            # what is known is not stalled, and one that is may only be stalled.
            stall = assess(description, known, now, settings.stall)
            if stall is not None and unknown:
                return _unchecked(job_name, f"GetLogEvents did not show the newest line of {', '.join(unknown)} "
                                            "(empty pages before the start of the range, or not the line "
                                            "DescribeLogStreams lists): an unknown line is never counted as silent")
    if stall is None:
        return {"job_name": job_name, "outcome": "making progress"}
    if not jobs.stop(job_name):
        logger.info("stalled job no longer stoppable", extra={"job_name": job_name})
        return {"job_name": job_name, "outcome": "already stopping"}
    message = stall.notification(now, settings.training_log_group)
    logger.warning("stalled training job stopped", extra=message)
    try:
        jobs.notify(settings.notification_topic_arn, stall.subject(), message)
    except (ClientError, BotoCoreError) as error:
        # The job is stopped all the same, and the next sweep no longer lists it: say so here, in the log and result.
        logger.error("stalled training job stopped, but the topic was not told", extra={
            "job_name": job_name, "error": str(error)})
        return {**message, "outcome": "stopped", "notification_error": str(error)}
    return {**message, "outcome": "stopped"}


def _unchecked(job_name: str, reason: str) -> dict[str, Any]:
    logger.warning("training job not checked", extra={"job_name": job_name, "reason": reason})
    return {"job_name": job_name, "outcome": "unchecked", "reason": reason}
