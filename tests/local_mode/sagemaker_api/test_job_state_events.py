"""The job state change events local mode delivers carry what SageMaker's carry (AWS's sample event, stored in
tests/fixtures/aws_events), in EventBridge's shape (timestamps in epoch milliseconds, tags as a map), and the stack's
rules route them as in the cloud: a completed job to the registrar, a tuning trial nowhere."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from shared_stacks import DEMO_CONTEXT

from local_mode.aws.event_rules import matches
from local_mode.sagemaker_api.job_state_events import training_job_state_change_event
from local_mode.aws.synthesized_app import synthesize
from local_mode.job_runtime.training_job import TrainingJob
from local_mode.sagemaker_api.tuning_job import trial_training_request

JOB = "ranker-web-2026-11-01-2fc0bef5c3"
ACCOUNT = "123456789012"
ARN = f"arn:aws:sagemaker:us-east-1:{ACCOUNT}"
SAMPLE = json.loads((Path(__file__).resolve().parents[2] / "fixtures" / "aws_events" /
                     "sagemaker_training_job_state_change.json").read_text())
# Beside the sample's fields: EventBridge's schema of the event adds ModelArtifacts, and a failed job's event carries
# FailureReason (the sample is a completed job's).
DOCUMENTED_FIELDS = set(SAMPLE["detail"]) | {"ModelArtifacts", "FailureReason"}
# A trial's definition as the trigger writes one, reduced to what CreateTrainingJob needs.
DEFINITION = {
    "AlgorithmSpecification": {"TrainingImage": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.2.0",
                               "TrainingInputMode": "File",
                               "MetricDefinitions": [{"Name": "val_ndcg@10", "Regex": "val_ndcg@10=([0-9.]+)"}]},
    "RoleArn": f"arn:aws:iam::{ACCOUNT}:role/ranker-sagemaker-execution",
    "OutputDataConfig": {"S3OutputPath": "s3://ranker-artifacts/models/"},
    "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
    "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
    "StaticHyperParameters": {"epochs": "4", "sagemaker_program": '"train_ddp.py"'},
}
TAGS = [{"Key": "dataset", "Value": "web"}]


def _description(status: str) -> dict[str, Any]:
    ended = datetime(2026, 11, 1, 6, 12, 40, tzinfo=timezone.utc)
    return {"TrainingJobName": JOB, "TrainingJobArn": f"{ARN}:training-job/{JOB}",
            "TrainingJobStatus": status, "TrainingEndTime": ended,
            "FinalMetricDataList": [{"MetricName": "val_ndcg@10", "Value": 0.8, "Timestamp": ended}],
            "ResponseMetadata": {"HTTPStatusCode": 200}}


def _failed_event(name: str, request: dict[str, Any], tuning_job: str | None) -> dict[str, Any]:
    """The state change of a local training job that failed, from its own DescribeTrainingJob answer."""
    job = TrainingJob(request, f"{ARN}:training-job/{name}",
                      tuning_job_arn=f"{ARN}:hyper-parameter-tuning-job/{tuning_job}" if tuning_job else None)
    job.finish("Failed", failure_reason="AlgorithmError: ExecuteUserScriptError: ExitCode 1")
    return training_job_state_change_event(job.describe(), TAGS, account=ACCOUNT)


@pytest.fixture(scope="module")
def training_job_rules() -> dict[str, list[dict[str, Any]]]:
    """The demo pipeline's rules on training job state changes, by what they deliver to: the registrar (its function's
    logical ID starts ModelRegistration), the topic (JobNotifications), or nothing but the failed-jobs alarm's count."""
    # The rules do not depend on the container, and the session synthesizes this stack once.
    template = json.loads(next(synthesize(context=DEMO_CONTEXT).glob("*-pipeline.template.json")).read_text())
    rules: dict[str, list[dict[str, Any]]] = {}
    for logical_id, resource in template["Resources"].items():
        if (resource["Type"] == "AWS::Events::Rule"
                and resource["Properties"].get("EventPattern", {}).get("detail-type") == [
                    "SageMaker Training Job State Change"]):
            owner = "registrar" if logical_id.startswith("ModelRegistration") else "notifications"
            rules.setdefault(owner, []).append(resource["Properties"]["EventPattern"])
    assert len(rules["registrar"]) == 1 and len(rules["notifications"]) == 2  # the topic's rule, the alarm's rule
    return rules


@pytest.mark.parametrize(("status", "matched"), [("Completed", True), ("Failed", False), ("Stopped", False)])
def test_the_registration_rule_matches_the_event_of_a_completed_job_only(training_job_rules, status, matched):
    event = training_job_state_change_event(_description(status), [], account=ACCOUNT)
    [registration_pattern] = training_job_rules["registrar"]
    assert matches(registration_pattern, event) is matched


def test_the_event_carries_the_description_in_eventbridges_shape():
    tags = [{"Key": "dataset", "Value": "web"}]
    event = training_job_state_change_event(_description("Completed"), tags, account=ACCOUNT)
    assert event["detail-type"] == "SageMaker Training Job State Change" and event["resources"] == [
        event["detail"]["TrainingJobArn"]]
    assert event["detail"]["TrainingEndTime"] == 1793513560000
    assert event["detail"]["Tags"] == {"dataset": "web"} and "ResponseMetadata" not in event["detail"]


def test_a_failed_local_trial_carries_what_sagemakers_event_carries_and_no_rule_sends_it_on(training_job_rules):
    # Given a trial as local SageMaker's tuning job starts it (the objective's name among its hyperparameters, the
    # tuning job's tags), and the same job started on its own, both failed
    trial = "ranker-web-2611011200-a1b2-003-4c5d6e7f"
    trial_request = trial_training_request(DEFINITION, name=trial, tuned={"learning-rate": "0.0031"},
                                           objective_metric="val_ndcg@10", tags=TAGS)
    trial_event = _failed_event(trial, trial_request, tuning_job="ranker-web-2611011200-a1b2")
    alone = {**trial_request, "TrainingJobName": JOB, "HyperParameters": DEFINITION["StaticHyperParameters"]}
    alone_event = _failed_event(JOB, alone, tuning_job=None)
    # Then the events hold only fields AWS documents for the event: no TuningJobArn, though DescribeTrainingJob has it
    assert set(trial_event["detail"]) <= DOCUMENTED_FIELDS and "TuningJobArn" not in trial_event["detail"]
    assert set(alone_event["detail"]) <= DOCUMENTED_FIELDS
    # and no rule delivers the trial's (no message, no alarm datapoint, no registration), while the lone job's message
    # is published and counted by the alarm
    assert not any(matches(pattern, trial_event) for patterns in training_job_rules.values() for pattern in patterns)
    assert all(matches(pattern, alone_event) for pattern in training_job_rules["notifications"])
