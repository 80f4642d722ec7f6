"""One invocation: parse the event, plan the job, build and check the request (a training job's, or a tuning job's
whose trials are that training job), then submit (or dry-run)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from training_trigger.datasets import DatasetCatalog
from training_trigger.errors import InvalidInput
from training_trigger.events import Ignored, TriggerRequest, parse_event
from training_trigger.notifications import publish_rejection
from training_trigger.observability import DUPLICATE_EVENTS, JOBS_REJECTED, JOBS_STARTED, count, logger
from training_trigger.planning import TrainingJobSpec, plan_training_job
from training_trigger.preflight import preflight_errors, tuning_preflight_errors
from training_trigger.model_trainer_request import training_job_request
from training_trigger.settings import Settings, load_settings
from training_trigger.submission import submit_training_job, submit_tuning_job
from training_trigger.tuning_request import build_tuning_job_request


def handle_event(event: Mapping[str, Any], settings: Settings | None = None) -> dict[str, Any]:
    """The invocation's result; with several S3 records, the first's fields plus every record's in `results`."""
    settings = settings or load_settings()
    try:
        parsed = parse_event(event, settings)
    except InvalidInput as invalid:
        return _reject(None, invalid.errors, event, settings)
    if isinstance(parsed, Ignored):
        return _ignore(parsed.reason)
    results = [_handle_request(request, event, settings) for request in parsed]
    return results[0] if len(results) == 1 else {**results[0], "results": results}


def _handle_request(request: TriggerRequest, event: Mapping[str, Any], settings: Settings) -> dict[str, Any]:
    catalog = DatasetCatalog(settings.data_bucket, settings.dataset_prefix, settings.marker_names)
    try:
        spec = plan_training_job(request, settings, catalog)
    except InvalidInput as invalid:
        return _reject(request.job_name, invalid.errors, event, settings)
    if spec is None:
        return _ignore(f"no complete dataset version under s3://{settings.data_bucket}/{settings.dataset_prefix}")
    logger.set_correlation_id(spec.job_name)
    job_request, errors, submit = _checked_request(spec, settings)
    if errors:
        return _reject(spec.job_name, errors, event, settings)
    kind = "training" if spec.tuning is None else "tuning"
    # A tuning job's result says so; a training job's keeps its shape.
    marked = {"job_kind": kind} if spec.tuning is not None else {}
    if spec.dry_run:
        logger.info(f"dry run: {kind} request built and checked, no job started", extra={"request": job_request})
        return {"status": "dry_run", "job_name": spec.job_name, **marked, "request": job_request}
    try:
        status = submit(job_request)
    except InvalidInput as refused:
        return _reject(spec.job_name, refused.errors, event, settings)
    count(JOBS_STARTED if status == "started" else DUPLICATE_EVENTS)
    logger.info(f"{kind} job {status}", extra={"trigger_source": request.source, "tags": dict(spec.tags)})
    return {"status": status, "job_name": spec.job_name, **marked}


def _checked_request(spec: TrainingJobSpec, settings: Settings) -> tuple[dict[str, Any], list[str], Callable]:
    """The request, what refuses it, and the call that sends it: a training job, or a tuning job whose trials are
    that training job."""
    training = training_job_request(spec, settings)
    if spec.tuning is None:
        return training, preflight_errors(training, spec, settings), submit_training_job
    tuning = build_tuning_job_request(spec, settings)
    return tuning, tuning_preflight_errors(tuning, training, spec, settings), submit_tuning_job


def _ignore(reason: str) -> dict[str, Any]:
    logger.info("event ignored", extra={"reason": reason})
    return {"status": "ignored", "job_name": None, "reason": reason}


def _reject(job_name: str | None, errors: list[str], event: Any, settings: Settings) -> dict[str, Any]:
    result = {"status": "rejected", "job_name": job_name, "errors": errors}
    logger.warning("input rejected", extra={"errors": errors})
    count(JOBS_REJECTED)
    try:
        publish_rejection(settings.notification_topic_arn, result, event)
    except (BotoCoreError, ClientError):
        # Retrying cannot fix the input; the log line and the metric still report it.
        logger.exception("could not publish the rejection", extra={"topic": settings.notification_topic_arn})
    return result
