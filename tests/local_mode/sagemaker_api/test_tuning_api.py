"""The tuning API of local SageMaker through a real boto3 client over HTTP: trials run through the training-job
runner, at most MaxParallelTrainingJobs at a time, named, scored and ranked as the service does.

The trials run tests/local_mode/scripts/score_flags.py, whose objective is
`epoch / (epoch + 1) - |log10(learning rate) + 2| / 10` for its last epoch: each test knows every trial's objective
from its tuned values alone.
"""

from __future__ import annotations

import json
import math
import re
import time
from typing import Any

import pytest
from botocore.exceptions import ClientError
from botocore.validate import ParamValidator

from local_mode.aws.event_rules import matches
from local_mode.sagemaker_api.job_state_events import TUNING_DETAIL_TYPE, tuning_job_state_change_event
from local_mode.pipeline import wait_for_tuning_job
from local_mode.sagemaker_api.request_validation import operation_model

pytestmark = pytest.mark.slow


def expected_objective(tuned: dict[str, str], static_epochs: int = 3) -> float:
    epochs = int(tuned.get("epochs", static_epochs))
    return round(epochs / (epochs + 1) - abs(math.log10(float(tuned["learning-rate"])) + 2) / 10, 6)


def wait_for_tuning(sagemaker: Any, name: str) -> dict[str, Any]:
    return wait_for_tuning_job(sagemaker, name, timeout=120)


def trials_of(sagemaker: Any, name: str) -> list[dict[str, Any]]:
    return sagemaker.list_training_jobs_for_hyper_parameter_tuning_job(
        HyperParameterTuningJobName=name, SortBy="Name", SortOrder="Ascending", MaxResults=100)["TrainingJobSummaries"]


def most_at_once(descriptions: list[dict[str, Any]]) -> int:
    """How many of the jobs were running at the same moment, at most (from their creation to their end)."""
    moments = sorted([(job["CreationTime"], 1) for job in descriptions] + [(job["TrainingEndTime"], -1)
                                                                            for job in descriptions],
                     key=lambda moment: (moment[0], moment[1]))
    running = peak = 0
    for _, change in moments:
        running += change
        peak = max(peak, running)
    return peak


def test_a_random_tuning_job_runs_its_trials_two_at_a_time_and_reports_the_best(tuning_sagemaker, tuning_request,
                                                                                 tuning_events):
    # Given 4 trials of learning-rate (log) and epochs (integer), 2 at a time, each holding for a second
    request = tuning_request("tune-random", static={"hold-seconds": "1"})

    # When the tuning job runs to its end
    arn = tuning_sagemaker.create_hyper_parameter_tuning_job(**request)["HyperParameterTuningJobArn"]
    description = wait_for_tuning(tuning_sagemaker, "tune-random")

    # Then it completed with 4 trials named as SageMaker names them, each drawn inside its ranges
    assert arn.endswith(":hyper-parameter-tuning-job/tune-random")
    assert description["HyperParameterTuningJobStatus"] == "Completed"
    trials = trials_of(tuning_sagemaker, "tune-random")
    assert [trial["TrainingJobName"][:len("tune-random-000")] for trial in trials] == [
        f"tune-random-{index:03d}" for index in (1, 2, 3, 4)]
    assert all(re.fullmatch(r"tune-random-\d{3}-[0-9a-f]{8}", trial["TrainingJobName"]) for trial in trials)
    for trial in trials:
        tuned = trial["TunedHyperParameters"]
        assert set(tuned) == {"learning-rate", "epochs"}
        assert 0.0001 <= float(tuned["learning-rate"]) <= 1 and tuned["epochs"] in ("1", "2", "3")
        # And each objective is the final value its log gave the metric definition's regex
        assert trial["ObjectiveStatus"] == "Succeeded"
        assert trial["FinalHyperParameterTuningJobObjectiveMetric"] == {
            "Type": "Maximize", "MetricName": "val_ndcg@10", "Value": pytest.approx(expected_objective(tuned))}
    # And the best job is the trial with the highest objective
    best = max(trials, key=lambda trial: expected_objective(trial["TunedHyperParameters"]))
    assert description["BestTrainingJob"]["TrainingJobName"] == best["TrainingJobName"]
    assert description["TrainingJobStatusCounters"] == {"Completed": 4, "InProgress": 0, "RetryableError": 0,
                                                        "NonRetryableError": 0, "Stopped": 0}
    assert description["ObjectiveStatusCounters"] == {"Succeeded": 4, "Pending": 0, "Failed": 0}
    # And never more than MaxParallelTrainingJobs trials ran at once, but that many did
    jobs = [tuning_sagemaker.describe_training_job(TrainingJobName=trial["TrainingJobName"]) for trial in trials]
    assert most_at_once(jobs) == 2
    # And each trial is the definition's training job with the static and tuned hyperparameters and the tags
    static = request["TrainingJobDefinition"]["StaticHyperParameters"]
    for job, trial in zip(jobs, trials):
        assert job["HyperParameters"] == {**static, **trial["TunedHyperParameters"],
                                          "_tuning_objective_metric": "val_ndcg@10"}
        assert job["AlgorithmSpecification"] == request["TrainingJobDefinition"]["AlgorithmSpecification"]
        assert job["TuningJobArn"] == arn
        assert tuning_sagemaker.list_tags(ResourceArn=job["TrainingJobArn"])["Tags"] == request["Tags"]


def test_the_answers_have_the_shape_of_the_service_model(tuning_sagemaker, tuning_request):
    # Given a finished tuning job
    tuning_sagemaker.create_hyper_parameter_tuning_job(**tuning_request("tune-shape", max_jobs=2))
    wait_for_tuning(tuning_sagemaker, "tune-shape")

    # When its raw answers are checked against the model's output shapes
    answers = {
        "DescribeHyperParameterTuningJob": tuning_sagemaker.describe_hyper_parameter_tuning_job(
            HyperParameterTuningJobName="tune-shape"),
        "ListTrainingJobsForHyperParameterTuningJob":
            tuning_sagemaker.list_training_jobs_for_hyper_parameter_tuning_job(
                HyperParameterTuningJobName="tune-shape")}

    # Then they break no constraint
    for operation, answer in answers.items():
        answer.pop("ResponseMetadata")
        report = ParamValidator().validate(answer, operation_model(operation).output_shape)
        assert not report.has_errors(), report.generate_report()


def test_a_grid_runs_every_combination_once_and_minimises(tuning_sagemaker, tuning_request):
    # Given a grid of 2 learning rates x 2 losses, its size left for the service to compute, all at once
    ranges = {"CategoricalParameterRanges": [{"Name": "learning-rate", "Values": ["0.01", "0.1"]},
                                             {"Name": "loss", "Values": ["listnet", "lambdarank"]}]}
    request = tuning_request("tune-grid", strategy="Grid", max_jobs=None, parallel=4, ranges=ranges, seed=None,
                             objective=("Minimize", "val_ndcg@10"))

    # When it runs
    tuning_sagemaker.create_hyper_parameter_tuning_job(**request)
    description = wait_for_tuning(tuning_sagemaker, "tune-grid")

    # Then each combination ran exactly once, the first range varying slowest
    trials = trials_of(tuning_sagemaker, "tune-grid")
    assert [trial["TunedHyperParameters"] for trial in trials] == [
        {"learning-rate": "0.01", "loss": "listnet"}, {"learning-rate": "0.01", "loss": "lambdarank"},
        {"learning-rate": "0.1", "loss": "listnet"}, {"learning-rate": "0.1", "loss": "lambdarank"}]
    # And the best job has the lowest objective (learning rate 0.1 after the static 3 epochs: 0.75 - 0.1)
    assert description["BestTrainingJob"]["FinalHyperParameterTuningJobObjectiveMetric"]["Value"] == pytest.approx(
        0.65)
    assert description["BestTrainingJob"]["TunedHyperParameters"]["learning-rate"] == "0.1"


def test_failed_trials_are_counted_and_the_best_is_among_the_others(tuning_sagemaker, tuning_request):
    # Given a grid of three learning rates where the script fails above 0.05
    ranges = {"CategoricalParameterRanges": [{"Name": "learning-rate", "Values": ["0.001", "0.01", "0.5"]}]}
    request = tuning_request("tune-some-fail", strategy="Grid", max_jobs=3, parallel=3, ranges=ranges,
                             static={"fail-above": "0.05"})

    # When it runs
    tuning_sagemaker.create_hyper_parameter_tuning_job(**request)
    description = wait_for_tuning(tuning_sagemaker, "tune-some-fail")

    # Then it completed, the failed trial counted as a non-retryable error with no objective
    assert description["HyperParameterTuningJobStatus"] == "Completed"
    assert description["TrainingJobStatusCounters"]["Completed"] == 2
    assert description["TrainingJobStatusCounters"]["NonRetryableError"] == 1
    assert description["ObjectiveStatusCounters"] == {"Succeeded": 2, "Pending": 0, "Failed": 1}
    failed = [trial for trial in trials_of(tuning_sagemaker, "tune-some-fail") if trial["TrainingJobStatus"] == "Failed"]
    assert [trial["TunedHyperParameters"]["learning-rate"] for trial in failed] == ["0.5"]
    assert "diverged" in failed[0]["FailureReason"] and "FinalHyperParameterTuningJobObjectiveMetric" not in failed[0]
    assert description["BestTrainingJob"]["TunedHyperParameters"] == {"learning-rate": "0.01"}
    # And listed by objective, the scored trials come best first and the failed one last; by status, only it
    by_objective = tuning_sagemaker.list_training_jobs_for_hyper_parameter_tuning_job(
        HyperParameterTuningJobName="tune-some-fail", SortBy="FinalObjectiveMetricValue")["TrainingJobSummaries"]
    assert [trial["TunedHyperParameters"]["learning-rate"] for trial in by_objective] == ["0.01", "0.001", "0.5"]
    failed_only = tuning_sagemaker.list_training_jobs_for_hyper_parameter_tuning_job(
        HyperParameterTuningJobName="tune-some-fail", StatusEquals="Failed")["TrainingJobSummaries"]
    assert [trial["TrainingJobName"] for trial in failed_only] == [failed[0]["TrainingJobName"]]


def test_a_tuning_job_whose_trials_all_fail_fails_and_says_why(tuning_sagemaker, tuning_request):
    ranges = {"CategoricalParameterRanges": [{"Name": "learning-rate", "Values": ["0.2", "0.5"]}]}
    request = tuning_request("tune-all-fail", strategy="Grid", max_jobs=None, ranges=ranges,
                             static={"fail-above": "0.05"})

    tuning_sagemaker.create_hyper_parameter_tuning_job(**request)
    description = wait_for_tuning(tuning_sagemaker, "tune-all-fail")

    assert description["HyperParameterTuningJobStatus"] == "Failed"
    assert "BestTrainingJob" not in description
    assert description["FailureReason"].startswith("All 2 training jobs failed. The first failure (tune-all-fail-001-")
    assert "diverged" in description["FailureReason"]


def test_a_completed_trial_without_the_objective_in_its_log_has_a_failed_objective(tuning_sagemaker, tuning_request):
    # Given an objective whose regex matches nothing the script prints
    request = tuning_request("tune-no-metric", max_jobs=1, parallel=1, objective=("Maximize", "test_ndcg@10"))

    tuning_sagemaker.create_hyper_parameter_tuning_job(**request)
    description = wait_for_tuning(tuning_sagemaker, "tune-no-metric")

    assert description["TrainingJobStatusCounters"]["Completed"] == 1
    assert description["ObjectiveStatusCounters"]["Failed"] == 1
    assert description["HyperParameterTuningJobStatus"] == "Failed"
    assert "No training job reported the objective metric 'test_ndcg@10'" in description["FailureReason"]


def test_stopping_a_tuning_job_stops_its_trials_and_starts_no_more(tuning_sagemaker, tuning_request):
    # Given 4 long trials, 2 at a time, the first two running
    tuning_sagemaker.create_hyper_parameter_tuning_job(**tuning_request("tune-stop", static={"hold-seconds": "60"}))
    deadline = time.monotonic() + 30
    while len(trials_of(tuning_sagemaker, "tune-stop")) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.2)

    # When the tuning job is stopped
    tuning_sagemaker.stop_hyper_parameter_tuning_job(HyperParameterTuningJobName="tune-stop")
    description = wait_for_tuning(tuning_sagemaker, "tune-stop")

    # Then it is Stopped with the two trials it had started, both stopped
    assert description["HyperParameterTuningJobStatus"] == "Stopped"
    assert [trial["TrainingJobStatus"] for trial in trials_of(tuning_sagemaker, "tune-stop")] == ["Stopped", "Stopped"]
    assert description["TrainingJobStatusCounters"]["Stopped"] == 2
    # And a second stop is refused as the service refuses it
    with pytest.raises(ClientError) as raised:
        tuning_sagemaker.stop_hyper_parameter_tuning_job(HyperParameterTuningJobName="tune-stop")
    assert raised.value.response["Error"]["Code"] == "ValidationException"


def test_the_state_changes_become_the_eventbridge_event_a_rule_on_completed_tuning_jobs_matches(
        tuning_sagemaker, tuning_request, tuning_events):
    # Given a rule on the project's completed tuning jobs, as a stack would write it
    rule = {"source": ["aws.sagemaker"], "detail-type": [TUNING_DETAIL_TYPE],
            "detail": {"HyperParameterTuningJobName": [{"prefix": "tune-"}],
                       "HyperParameterTuningJobStatus": ["Completed"]}}

    # When a tuning job runs to its end
    request = tuning_request("tune-event", max_jobs=1, parallel=1)
    tuning_sagemaker.create_hyper_parameter_tuning_job(**request)
    final = wait_for_tuning(tuning_sagemaker, "tune-event")
    deadline = time.monotonic() + 10
    while len(tuning_events) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.1)

    # Then it announced its start and its end, and only the end's event matches the rule
    assert [event["HyperParameterTuningJobStatus"] for event in tuning_events] == ["InProgress", "Completed"]
    events = [tuning_job_state_change_event(description, request["Tags"], account="123456789012")
              for description in tuning_events]
    assert [matches(rule, event) for event in events] == [False, True]
    # And the event's detail carries what AWS's sample event does (the trials by status, no BestTrainingJob: the
    # registrar asks DescribeHyperParameterTuningJob for that), with timestamps in epoch milliseconds
    detail = events[1]["detail"]
    assert detail["TrainingJobStatusCounters"] == final["TrainingJobStatusCounters"] and "BestTrainingJob" not in detail
    assert detail["CreationTime"] == int(final["CreationTime"].timestamp() * 1000)
    assert detail["Tags"] == {"dataset": "toy"} and events[1]["resources"] == [final["HyperParameterTuningJobArn"]]
    assert json.dumps(events[1])  # EventBridge carries JSON


@pytest.mark.parametrize(("change", "message"), [
    (lambda request: request["HyperParameterTuningJobConfig"]["HyperParameterTuningJobObjective"].update(
        MetricName="val_auc"), "A metric is required for this hyperparameter tuning job objective"),
    (lambda request: request["HyperParameterTuningJobConfig"]["ResourceLimits"].pop("MaxNumberOfTrainingJobs"),
     "MaxNumberOfTrainingJobs is required for the Random strategy"),
    (lambda request: request["HyperParameterTuningJobConfig"].update(Strategy="Grid"),
     "the Grid strategy searches categorical ranges only"),
    (lambda request: request["HyperParameterTuningJobConfig"]["ParameterRanges"]["ContinuousParameterRanges"][0].update(
        MinValue="0"), "Logarithmic scaling needs MinValue above 0"),
    (lambda request: request["TrainingJobDefinition"]["StaticHyperParameters"].update(epochs="2"),
     "['epochs'] are also tuned"),
    (lambda request: request.update(HyperParameterTuningJobName="a-tuning-job-name-over-32-characters"),
     "Member must have length less than or equal to 32"),
    (lambda request: request["TrainingJobDefinition"]["ResourceConfig"].update(InstanceCount=0),
     "ResourceConfig.InstanceCount must be at least 1"),
    (lambda request: request.update(WarmStartConfig={"WarmStartType": "IdenticalDataAndAlgorithm",
                                                     "ParentHyperParameterTuningJobs": [
                                                         {"HyperParameterTuningJobName": "never-ran"}]}),
     "holds no tuning job named 'never-ran'"),
    (lambda request: request.update(TrainingJobDefinitions=[request.pop("TrainingJobDefinition")]),
     "local mode runs tuning jobs of one TrainingJobDefinition"),
    (lambda request: request["TrainingJobDefinition"].update(HyperParameterTuningResourceConfig={
        "InstanceType": "ml.c5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 50}),
     "give exactly one of ResourceConfig and HyperParameterTuningResourceConfig"),
])
def test_requests_the_service_refuses_are_refused_before_any_trial(tuning_sagemaker, tuning_request, change, message):
    request = tuning_request("tune-refused")
    change(request)

    with pytest.raises(ClientError) as raised:
        tuning_sagemaker.create_hyper_parameter_tuning_job(**request)

    assert raised.value.response["Error"]["Code"] == "ValidationException"
    assert message in raised.value.response["Error"]["Message"]
    assert tuning_sagemaker.list_training_jobs()["TrainingJobSummaries"] == []


def test_trials_run_on_the_instances_the_tuning_resource_config_names(tuning_sagemaker, tuning_request):
    # Given a definition in the tuning API's own resource shape, as SDK v2 sends it
    request = tuning_request("tune-resources", max_jobs=1, parallel=1)
    definition = request["TrainingJobDefinition"]
    definition["HyperParameterTuningResourceConfig"] = {"InstanceType": "ml.c5.xlarge", "InstanceCount": 1,
                                                        "VolumeSizeInGB": 50}
    del definition["ResourceConfig"]

    # When it runs
    tuning_sagemaker.create_hyper_parameter_tuning_job(**request)
    assert wait_for_tuning(tuning_sagemaker, "tune-resources")["HyperParameterTuningJobStatus"] == "Completed"

    # Then its trial ran on those instances
    trial = trials_of(tuning_sagemaker, "tune-resources")[0]["TrainingJobName"]
    assert tuning_sagemaker.describe_training_job(TrainingJobName=trial)["ResourceConfig"] == {
        "InstanceType": "ml.c5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 50}


def test_an_unknown_tuning_job_is_not_found(tuning_sagemaker):
    with pytest.raises(ClientError) as raised:
        tuning_sagemaker.describe_hyper_parameter_tuning_job(HyperParameterTuningJobName="tune-unknown")
    assert raised.value.response["Error"]["Code"] == "ResourceNotFound"


def test_a_tuning_job_name_is_unique(tuning_sagemaker, tuning_request):
    request = tuning_request("tune-twice", max_jobs=1, parallel=1)
    tuning_sagemaker.create_hyper_parameter_tuning_job(**request)

    with pytest.raises(ClientError) as raised:
        tuning_sagemaker.create_hyper_parameter_tuning_job(**request)

    assert raised.value.response["Error"]["Code"] == "ResourceInUse"
    wait_for_tuning(tuning_sagemaker, "tune-twice")
