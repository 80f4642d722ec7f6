"""One invocation: a job state event in; the job's model registered, or refused, and the team told either way.

A completed training job registers its own model, unless a tuning job started it; a completed tuning job
registers its best trial's model, and says how many trials ran and which won."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from typing import Any

from aws_lambda_powertools.utilities.data_classes import EventBridgeEvent

from model_registration.observability import count, logger
from model_registration.registration import (SERVING_HANDLER_MEMBER, Refusal, plan_registration,
                                             unchecked_handler_note, unservable_reason)
from model_registration.registry import Registry
from model_registration.settings import Settings, load_settings
from model_registration.tuning import TuningOutcome, tuning_outcome

MODELS_REGISTERED = "ModelsRegistered"
MODELS_REFUSED = "ModelsRefused"
COMPLETED = "Completed"
TUNING_JOB_EVENT = "SageMaker HyperParameter Tuning Job State Change"
# Left for what follows the artifact's read (the group, the quality report, the package, the notification, each
# call with its retries) before the function's timeout.
RESERVE_SECONDS = 15


def handle_event(event: Mapping[str, Any], settings: Settings | None = None, registry: Registry | None = None,
                 remaining_seconds: Callable[[], float] | None = None) -> dict[str, Any]:
    """`remaining_seconds`: the time left before the function's timeout (the Lambda context's); None: no limit."""
    settings = settings or load_settings()
    read_until = math.inf if remaining_seconds is None else time.monotonic() + remaining_seconds() - RESERVE_SECONDS
    parsed = EventBridgeEvent(dict(event))
    detail = parsed.detail or {}
    tuned = parsed.get("detail-type") == TUNING_JOB_EVENT
    name_key, status_key = (("HyperParameterTuningJobName", "HyperParameterTuningJobStatus") if tuned
                            else ("TrainingJobName", "TrainingJobStatus"))
    job_name, status = detail.get(name_key), detail.get(status_key)
    # The rules deliver only the project's completed jobs; anything else is a hand-made event.
    if not job_name or status != COMPLETED or not job_name.startswith(f"{settings.project_prefix}-"):
        return _ignore(job_name, f"not a {COMPLETED} {'tuning' if tuned else 'training'} job of this project: "
                                 f"{name_key}={job_name!r}, {status_key}={status!r}")
    logger.set_correlation_id(job_name)
    registry = registry or Registry()
    if not tuned:
        description = registry.describe_training_job(job_name)
        if description.get("TuningJobArn"):
            return _ignore(job_name, f"a trial of tuning job {description['TuningJobArn'].rsplit('/', 1)[-1]}, "
                                     f"which registers its best trial's model when it completes")
        return _register(job_name, description, settings, registry, read_until)
    outcome = tuning_outcome(registry.describe_tuning_job(job_name))
    if outcome.best_training_job is None:
        return _refuse(job_name, f"none of its {outcome.trials['total']} trials reported {outcome.objective_metric!r}"
                                 f", so it has no best training job to register", settings, registry, outcome)
    return _register(outcome.best_training_job, registry.describe_training_job(outcome.best_training_job),
                     settings, registry, read_until, outcome)


def _ignore(job_name: str | None, reason: str) -> dict[str, Any]:
    logger.info("event ignored", extra={"reason": reason})
    return {"status": "ignored", "job_name": job_name, "reason": reason}


def _refuse(job_name: str, reason: str, settings: Settings, registry: Registry,
            tuning: TuningOutcome | None) -> dict[str, Any]:
    result = {"status": "refused", "job_name": job_name, "reason": reason, **_tuning_fields(tuning)}
    logger.warning("model not registered", extra={"reason": reason})
    count(MODELS_REFUSED)
    subject = f"Model not registered: {tuning.tuning_job if tuning else job_name}"
    registry.notify(settings.notification_topic_arn, subject, result)
    return result


def _register(job_name: str, description: Mapping[str, Any], settings: Settings, registry: Registry,
              read_until: float, tuning: TuningOutcome | None = None) -> dict[str, Any]:
    plan = plan_registration(description, registry.training_job_tags(description["TrainingJobArn"]), settings,
                             tuning)
    if isinstance(plan, Refusal):
        return _refuse(job_name, plan.reason, settings, registry, tuning)
    # A package of a model without its handler would be registered, approved and then fail to deploy. An archive
    # too large to read in the time left is registered, saying its handler went unchecked: refusing a model that
    # may well be servable, or timing out into the dead-letter queue, would lose more.
    handler_found = registry.archive_holds(plan.artifact, SERVING_HANDLER_MEMBER, read_until)
    if handler_found is False:
        return _refuse(job_name, unservable_reason(plan.artifact), settings, registry, tuning)
    registry.ensure_model_package_group(plan.group_name, plan.group_description)
    registry.put_json(plan.quality_report_uri, plan.quality_report)
    package_arn = registry.create_model_package(plan.package_request)
    result = {"status": "registered", "job_name": job_name, "model_package_arn": package_arn,
              "model_approval_status": plan.package_request["ModelApprovalStatus"],
              "metrics": plan.metrics, **_tuning_fields(tuning)}
    if handler_found is None:
        result["note"] = unchecked_handler_note(plan.artifact)
    logger.info("model registered", extra=result)
    count(MODELS_REGISTERED)
    subject = (f"Best of {tuning.trials['total']} trials registered, pending approval: {plan.group_name}" if tuning
               else f"Model registered, pending approval: {plan.group_name}")
    registry.notify(settings.notification_topic_arn, subject, result)
    return result


def _tuning_fields(tuning: TuningOutcome | None) -> dict[str, Any]:
    """Beside the metrics: how many trials ran, which won, and its objective value."""
    return {} if tuning is None else {"tuning": tuning.summary()}
