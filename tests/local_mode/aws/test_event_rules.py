"""Local EventBridge matching (moto's EventBridge matcher) agrees with EventBridge's documented semantics on the
pattern features the stacks write."""

from __future__ import annotations

import pytest

from local_mode.aws.event_rules import matches

EVENT = {"source": "aws.sagemaker", "detail-type": "SageMaker HyperParameter Tuning Job State Change",
         "resources": ["arn:one", "arn:two"],
         "detail": {"HyperParameterTuningJobName": "ranker-tune-1", "HyperParameterTuningJobStatus": "Completed",
                    "BestTrainingJob": {"TrainingJobName": "ranker-tune-1-001-0a1b2c3d"}}}


@pytest.mark.parametrize(("pattern", "matched"), [
    ({"source": ["aws.sagemaker"]}, True),
    ({"source": ["aws.s3", "aws.sagemaker"]}, True),
    ({"source": ["aws.s3"]}, False),
    ({"detail": {"HyperParameterTuningJobName": [{"prefix": "ranker-"}]}}, True),
    ({"detail": {"HyperParameterTuningJobName": [{"prefix": "other-"}]}}, False),
    ({"detail": {"HyperParameterTuningJobStatus": ["Completed"], "BestTrainingJob": {"TrainingJobName": [
        {"prefix": "ranker-tune-1-"}]}}}, True),
    ({"detail": {"TrainingJobStatus": ["Completed"]}}, False),  # a field the event lacks never matches a value
    ({"detail": {"FailureReason": [{"exists": False}]}}, True),
    # "Comparison operators only work on leaf nodes" (EventBridge, Comparison operators): not on an object
    ({"detail": {"BestTrainingJob": [{"exists": True}]}}, False),
    ({"detail": {"BestTrainingJob": {"TrainingJobName": [{"exists": True}]}}}, True),
    ({"detail": {"HyperParameters": {"_tuning_objective_metric": [{"exists": False}]}}}, True),
    ({"detail": {"HyperParameterTuningJobStatus": [{"anything-but": ["Failed", "Stopped"]}]}}, True),
    ({"detail": {"HyperParameterTuningJobStatus": [{"anything-but": "Completed"}]}}, False),
    ({"resources": ["arn:two"]}, True),  # a list value matches when any element does
    ({"detail": ["Completed"]}, False),
])
def test_an_event_matches_a_pattern_as_eventbridge_matches_it(pattern, matched):
    assert matches(pattern, EVENT) is matched
