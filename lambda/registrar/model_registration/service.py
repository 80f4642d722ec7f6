"""One invocation: a job state event in; the job's model registered, or refused, and the team told either way."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_lambda_powertools.utilities.data_classes import EventBridgeEvent

from model_registration.observability import count, logger
from model_registration.registration import Refusal, plan_registration
from model_registration.registry import Registry
from model_registration.settings import Settings, load_settings

MODELS_REGISTERED = "ModelsRegistered"
MODELS_REFUSED = "ModelsRefused"
COMPLETED = "Completed"


def handle_event(event: Mapping[str, Any], settings: Settings | None = None,
                 registry: Registry | None = None) -> dict[str, Any]:
    settings = settings or load_settings()
    detail = EventBridgeEvent(dict(event)).detail or {}
    job_name, status = detail.get("TrainingJobName"), detail.get("TrainingJobStatus")
    # The rule delivers only the project's completed jobs; anything else is a hand-made event.
    if not job_name or status != COMPLETED or not job_name.startswith(f"{settings.project_prefix}-"):
        reason = (f"not a {COMPLETED} training job of this project: TrainingJobName={job_name!r}, "
                  f"TrainingJobStatus={status!r}")
        logger.info("event ignored", extra={"reason": reason})
        return {"status": "ignored", "job_name": job_name, "reason": reason}
    logger.set_correlation_id(job_name)
    registry = registry or Registry()
    description = registry.describe_training_job(job_name)
    plan = plan_registration(description, registry.training_job_tags(description["TrainingJobArn"]), settings)
    if isinstance(plan, Refusal):
        result = {"status": "refused", "job_name": job_name, "reason": plan.reason}
        logger.warning("model not registered", extra={"reason": plan.reason})
        count(MODELS_REFUSED)
        registry.notify(settings.notification_topic_arn, f"Model not registered: {job_name}", result)
        return result
    registry.ensure_model_package_group(plan.group_name, plan.group_description)
    registry.put_json(plan.quality_report_uri, plan.quality_report)
    package_arn = registry.create_model_package(plan.package_request)
    result = {"status": "registered", "job_name": job_name, "model_package_arn": package_arn,
              "model_approval_status": plan.package_request["ModelApprovalStatus"],
              "metrics": plan.metrics}
    logger.info("model registered", extra=result)
    count(MODELS_REGISTERED)
    registry.notify(settings.notification_topic_arn, f"Model registered, pending approval: {plan.group_name}",
                    result)
    return result
