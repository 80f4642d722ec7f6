"""The job state change event local mode delivers is one the stack's registration rule matches, in EventBridge's
shape (timestamps in epoch milliseconds, tags as a map)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

import pytest
from shared_stacks import DEMO_CONTEXT

from local_mode.event_rules import matches
from local_mode.job_state_events import training_job_state_change_event
from local_mode.synthesized_app import synthesize

JOB = "ranker-web-2026-11-01-2fc0bef5c3"


def _description(status: str) -> dict[str, Any]:
    ended = datetime(2026, 11, 1, 6, 12, 40, tzinfo=timezone.utc)
    return {"TrainingJobName": JOB, "TrainingJobArn": f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{JOB}",
            "TrainingJobStatus": status, "TrainingEndTime": ended,
            "FinalMetricDataList": [{"MetricName": "val_ndcg@10", "Value": 0.8, "Timestamp": ended}],
            "ResponseMetadata": {"HTTPStatusCode": 200}}


@pytest.fixture(scope="module")
def registration_pattern() -> dict[str, Any]:
    # The demo pipeline's stack: the rule does not depend on the container, and the session synthesizes it once.
    template = json.loads(next(synthesize(context=DEMO_CONTEXT).glob("*-pipeline.template.json")).read_text())
    # The registrar's rules: one for training jobs, one for tuning jobs (tests/local_mode/test_tuning_demo.py)
    patterns = [resource["Properties"]["EventPattern"] for logical_id, resource in template["Resources"].items()
                if resource["Type"] == "AWS::Events::Rule" and logical_id.startswith("ModelRegistration")
                and resource["Properties"]["EventPattern"]["detail-type"] == ["SageMaker Training Job State Change"]]
    assert len(patterns) == 1
    return patterns[0]


@pytest.mark.parametrize(("status", "matched"), [("Completed", True), ("Failed", False), ("Stopped", False)])
def test_the_registration_rule_matches_the_event_of_a_completed_job_only(registration_pattern, status, matched):
    event = training_job_state_change_event(_description(status), [], account="123456789012")
    assert matches(registration_pattern, event) is matched


def test_the_event_carries_the_description_in_eventbridges_shape():
    tags = [{"Key": "dataset", "Value": "web"}]
    event = training_job_state_change_event(_description("Completed"), tags, account="123456789012")
    assert event["detail-type"] == "SageMaker Training Job State Change" and event["resources"] == [
        event["detail"]["TrainingJobArn"]]
    assert event["detail"]["TrainingEndTime"] == 1793513560000
    assert event["detail"]["FinalMetricDataList"][0]["Timestamp"] == 1793513560000
    assert event["detail"]["Tags"] == {"dataset": "web"} and "ResponseMetadata" not in event["detail"]
