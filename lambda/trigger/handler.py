"""Trigger Lambda entry point (placeholder until the trigger logic lands: it only logs the event)."""

import json
import logging

logger = logging.getLogger()
logger.setLevel(logging.INFO)


def lambda_handler(event, context):
    logger.info("received event: %s", json.dumps(event)[:2000])
    return {"status": "ignored", "job_name": None, "request": None}
