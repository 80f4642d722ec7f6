"""Trigger Lambda: a dataset marker, a schedule or a manual payload in; a SageMaker training job (or tuning
job) out."""

from training_trigger.observability import logger, metrics
from training_trigger.service import handle_event


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def lambda_handler(event: dict, context: object) -> dict:
    return handle_event(event)
