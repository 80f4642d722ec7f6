"""Which of SageMaker's job state changes reach the topic, the failed-jobs alarm and the registrar: the synthesized
rules' event patterns, matched by moto's EventBridge matcher against events of the shape AWS documents.

The samples in tests/fixtures/aws_events are AWS's own ("Events that Amazon SageMaker AI sends to Amazon EventBridge",
automating-sagemaker-with-eventbridge): the training job's event carries the job's HyperParameters and Tags, and no
TuningJobArn. A trial is marked by the hyperparameter SageMaker adds to every job a tuning job starts.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from local_mode.aws.event_rules import matches

from .synthesis import SynthesizedApp, function_of_service, resources_of_type

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "aws_events"
TRAINING_EVENT = json.loads((SAMPLES / "sagemaker_training_job_state_change.json").read_text())
TUNING_EVENT = json.loads((SAMPLES / "sagemaker_hyperparameter_tuning_job_state_change.json").read_text())
TUNING_JOB = "ranker-web-2611011200-a1b2"
TRIAL = f"{TUNING_JOB}-003-4c5d6e7f"  # how SageMaker names a tuning job's trials
PLAIN_JOB = "ranker-web-v1-2fc0bef5c3"
ARN = "arn:aws:sagemaker:us-east-1:123456789012"


def _training_event(name: str, status: str, *, trial: bool) -> dict[str, Any]:
    """AWS's sample event for the project's job `name` in `status`: a trial's hyperparameters hold the objective's
    name under `_tuning_objective_metric`, beside the static and tuned ones."""
    event = copy.deepcopy(TRAINING_EVENT)
    detail = event["detail"]
    event["resources"] = [f"{ARN}:training-job/{name}"]
    detail.update(TrainingJobName=name, TrainingJobArn=event["resources"][0], TrainingJobStatus=status,
                  SecondaryStatus=status, HyperParameters={"epochs": "20", "learning-rate": "0.0031",
                                                           "sagemaker_program": '"train_ddp.py"'})
    if trial:
        detail["HyperParameters"]["_tuning_objective_metric"] = "val_ndcg@10"
    if status == "Failed":
        detail["FailureReason"] = 'AlgorithmError: ExecuteUserScriptError: ExitCode 1 ErrorMessage "ValueError"'
    return event


def _tuning_event(status: str) -> dict[str, Any]:
    event = copy.deepcopy(TUNING_EVENT)
    event["resources"] = [f"{ARN}:hyper-parameter-tuning-job/{TUNING_JOB}"]
    event["detail"].update(HyperParameterTuningJobName=TUNING_JOB, HyperParameterTuningJobArn=event["resources"][0],
                           HyperParameterTuningJobStatus=status)
    return event


def _reference(value: dict[str, Any]) -> str:
    return value["Ref"] if "Ref" in value else value["Fn::GetAtt"][0]


def _patterns(template: dict[str, Any], target: str) -> list[dict[str, Any]]:
    """The event patterns of the rules that deliver to the resource `target` (its logical ID)."""
    return [rule["Properties"]["EventPattern"] for rule in resources_of_type(template, "AWS::Events::Rule").values()
            if "EventPattern" in rule["Properties"]
            and any(_reference(item["Arn"]) == target for item in rule["Properties"].get("Targets", []))]


@pytest.fixture(scope="module")
def routes(dev_app: SynthesizedApp) -> dict[str, list[dict[str, Any]]]:
    """The patterns of the rules that publish to the topic, of the rule whose matches the failed-jobs alarm counts
    (its AWS/Events MatchedEvents), and of the rules that invoke the registrar."""
    template = dev_app.stateless
    topic, = resources_of_type(template, "AWS::SNS::Topic")
    rules = resources_of_type(template, "AWS::Events::Rule")
    [failed_alarm] = [alarm["Properties"] for alarm in resources_of_type(template, "AWS::CloudWatch::Alarm").values()
                      if alarm["Properties"].get("MetricName") == "MatchedEvents"]
    [counted] = [_reference(dimension["Value"]) for dimension in failed_alarm["Dimensions"]
                 if dimension["Name"] == "RuleName"]
    registrar, = [logical_id for logical_id, function in resources_of_type(template, "AWS::Lambda::Function").items()
                  if function is function_of_service(template, "model-registration")]
    return {"topic": _patterns(template, topic), "alarm": [rules[counted]["Properties"]["EventPattern"]],
            "registrar": _patterns(template, registrar)}


def _delivered(patterns: list[dict[str, Any]], event: dict[str, Any]) -> bool:
    return any(matches(pattern, event) for pattern in patterns)


def test_a_failed_trial_sends_no_message_and_no_alarm_datapoint(routes):
    # Given a trial of a tuning job that failed (the tuning job goes on with its other trials)
    event = _training_event(TRIAL, "Failed", trial=True)
    # Then no rule publishes it to the topic, and the failed-jobs alarm's rule does not count it
    assert not _delivered(routes["topic"], event)
    assert not _delivered(routes["alarm"], event)


def test_a_failed_training_job_still_sends_its_message_and_trips_the_alarm(routes):
    # Given the same event of a job the trigger started on its own (no tuning objective among its hyperparameters)
    event = _training_event(PLAIN_JOB, "Failed", trial=False)
    # Then its message is published and the alarm's rule counts it
    assert _delivered(routes["topic"], event) and _delivered(routes["alarm"], event)


@pytest.mark.parametrize("status", ["Completed", "Failed", "Stopped"])
def test_the_tuning_jobs_own_state_change_still_reaches_the_topic(routes, status):
    # The tuning job's message counts its trials by status (TrainingJobStatusCounters)
    assert _delivered(routes["topic"], _tuning_event(status))


def test_a_completed_trial_does_not_invoke_the_registrar_and_a_completed_job_does(routes):
    # The tuning job's Completed event registers its best trial; a trial's own event has nothing to register
    assert not _delivered(routes["registrar"], _training_event(TRIAL, "Completed", trial=True))
    assert _delivered(routes["registrar"], _training_event(PLAIN_JOB, "Completed", trial=False))
    assert _delivered(routes["registrar"], _tuning_event("Completed"))
