"""A completed tuning job registers its best trial's model, and only that one, on real botocore clients under
Stubbers (every call checked against the service model; one a test did not queue fails it)."""

from __future__ import annotations

import json

import pytest
from botocore.stub import ANY
from model_registration import service
from model_registration.settings import settings_from_environ

from registrar.conftest import SERVABLE_MODEL
from registrar.samples import TOPIC_ARN, load, stack_environ
from registrar.test_service import GROUP, PACKAGE_ARN

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics:UserWarning")

TUNING_JOB = "ranker-web-sear-8254c329a9"
BEST = "ranker-web-sear-8254c329a9-003-5c1e9f0a"
BEST_ARN = f"arn:aws:sagemaker:eu-west-1:123456789012:training-job/{BEST}"


def test_a_completed_tuning_job_registers_its_best_trial_with_the_objective_beside_the_metrics(stubs):
    # Given a tuning job of dataset "web search" whose third of four trials won (its tags are the tuning job's)
    stubs.sagemaker.add_response("describe_hyper_parameter_tuning_job", load("describe_tuning_job.json"),
                                 {"HyperParameterTuningJobName": TUNING_JOB})
    stubs.sagemaker.add_response("describe_training_job", load("describe_tuning_trial.json"),
                                 {"TrainingJobName": BEST})
    stubs.sagemaker.add_response("list_tags", load("training_job_tags.json"), {"ResourceArn": BEST_ARN})
    stubs.artifact_holds(f"s3://ranker-artifacts/models/{BEST}/output/model.tar.gz", SERVABLE_MODEL)
    stubs.sagemaker.add_response("describe_model_package_group", {
        "ModelPackageGroupName": GROUP, "ModelPackageGroupArn": f"arn:{GROUP}", "CreationTime": "2026-10-01T00:00:00Z",
        "CreatedBy": {}, "ModelPackageGroupStatus": "Completed"}, {"ModelPackageGroupName": GROUP})
    stubs.s3.add_response("put_object", {}, {"Bucket": "ranker-artifacts", "Body": ANY,
                                             "Key": f"models/{BEST}/output/model_quality.json",
                                             "ContentType": "application/json"})
    packages = []
    stubs.sagemaker.client.meta.events.register("before-parameter-build.sagemaker.CreateModelPackage",
                                                lambda params, **_: packages.append(dict(params)))
    stubs.sagemaker.add_response("create_model_package", {"ModelPackageArn": PACKAGE_ARN}, None)
    stubs.sns.add_response("publish", {"MessageId": "1"}, {"TopicArn": TOPIC_ARN, "Subject": ANY, "Message": ANY})
    sent = stubs.published()
    # When its Completed state change arrives
    result = service.handle_event(load("tuning_job_completed.json"), settings_from_environ(stack_environ()),
                                  stubs.registry())
    # Then the best trial's model is registered, with the tuning job and the objective value beside its metrics
    assert result["status"] == "registered" and result["job_name"] == BEST
    assert result["metrics"]["val_ndcg@10"] == 0.8461
    assert result["tuning"] == {"tuning_job": TUNING_JOB, "best_training_job": BEST,
                                "objective": {"metric": "val_ndcg@10", "type": "Maximize", "value": 0.8461},
                                "trials": {"completed": 3, "inProgress": 0, "retryableError": 0,
                                           "nonRetryableError": 1, "stopped": 0, "total": 4}}
    metadata = packages[0]["CustomerMetadataProperties"]
    assert (metadata["training-job"], metadata["tuning-job"], metadata["tuning-objective-value"]) == \
        (BEST, TUNING_JOB, "0.8461")
    assert "best of 4 trials of tuning job ranker-web-sear-8254c329a9: val_ndcg@10=0.8461 (Maximize)" in \
        packages[0]["ModelPackageDescription"]
    # And the notification says how many trials ran and which won
    assert sent[0]["Subject"] == f"Best of 4 trials registered, pending approval: {GROUP}"
    assert json.loads(sent[0]["Message"])["tuning"]["best_training_job"] == BEST


def test_a_trial_that_completes_is_left_to_its_tuning_job(stubs):
    # Given the Completed event of one trial (a training job a tuning job started)
    event = load("training_job_completed.json")
    event["detail"]["TrainingJobName"] = BEST
    stubs.sagemaker.add_response("describe_training_job", load("describe_tuning_trial.json"),
                                 {"TrainingJobName": BEST})
    # When it arrives / Then nothing is registered (any registry call would fail the Stubber)
    result = service.handle_event(event, settings_from_environ(stack_environ()), stubs.registry())
    assert result["status"] == "ignored"
    assert result["reason"].startswith(f"a trial of tuning job {TUNING_JOB}, which registers its best trial")


def test_a_tuning_job_without_a_best_trial_is_refused_and_the_notification_says_so(stubs):
    description = load("describe_tuning_job.json")
    del description["BestTrainingJob"]
    description["TrainingJobStatusCounters"] = {"Completed": 0, "InProgress": 0, "RetryableError": 0,
                                                "NonRetryableError": 4, "Stopped": 0}
    stubs.sagemaker.add_response("describe_hyper_parameter_tuning_job", description,
                                 {"HyperParameterTuningJobName": TUNING_JOB})
    stubs.sns.add_response("publish", {"MessageId": "1"}, None)
    sent = stubs.published()
    result = service.handle_event(load("tuning_job_completed.json"), settings_from_environ(stack_environ()),
                                  stubs.registry())
    assert result["status"] == "refused"
    assert result["reason"] == "none of its 4 trials reported 'val_ndcg@10', so it has no best training job to register"
    assert sent[0]["Subject"] == f"Model not registered: {TUNING_JOB}"


def test_a_tuning_job_that_did_not_complete_is_ignored_without_any_call(stubs):
    event = load("tuning_job_completed.json")
    event["detail"]["HyperParameterTuningJobStatus"] = "Stopped"
    result = service.handle_event(event, settings_from_environ(stack_environ()), stubs.registry())
    assert result["status"] == "ignored" and "HyperParameterTuningJobStatus='Stopped'" in result["reason"]
