"""Registrar Lambda: a project training job (or tuning job) reached Completed; its model (its best trial's) goes into
the Model Registry."""

from model_registration.observability import logger, metrics
from model_registration.service import handle_event


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def lambda_handler(event: dict, context: object) -> dict:
    return handle_event(event, remaining_seconds=lambda: context.get_remaining_time_in_millis() / 1000)
