"""Stalled-job watchdog Lambda: on its schedule, stops the project's training jobs whose logs fell silent."""

from job_watchdog.observability import logger, metrics
from job_watchdog.service import handle_event


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def lambda_handler(event: dict, context: object) -> dict:
    return handle_event(event, remaining_seconds=lambda: context.get_remaining_time_in_millis() / 1000)
