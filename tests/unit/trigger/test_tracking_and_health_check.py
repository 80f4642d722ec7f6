"""Two job features with a stack default and a per-job override: the MLflow run a job logs to (the stack's
`mlflow_resource_arn`, the experiment of the job's dataset or the one a manifest or payload names, the run named after
the job) and SageMaker's cluster health check (`infra_check`). Both are checked before any call, pass botocore's
model and show in dry runs.

The trigger's service runs with botocore Stubbers on the real clients, as in test_environment_and_sharding.py, whose
helpers these tests use.
"""

from __future__ import annotations

import pytest
from ranker.training import tracking
from training_trigger import experiment_tracking
from training_trigger.experiment_tracking import MlflowRun, resource_arn_errors
from training_trigger.preflight import service_model_errors, tuning_preflight_errors
from training_trigger.request import build_training_job_request
from training_trigger.settings import SettingsError
from training_trigger.tuning import parse_tuning_section, resolve_tuning
from training_trigger.tuning_request import build_tuning_job_request

from trigger import test_environment_and_sharding as environment_tests
from trigger.sample_inputs import job_spec, stack_settings

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics:UserWarning")

SERVER_ARN = "arn:aws:sagemaker:eu-west-1:123456789012:mlflow-tracking-server/ranking"
APP_ARN = "arn:aws:sagemaker:eu-west-1:123456789012:mlflow-app/app-7QBQXKZ3T2UH"
ARN_PATTERN = environment_tests.MODEL.shape_for("MlflowConfig").members["MlflowResourceArn"].metadata["pattern"]
deployed = environment_tests.deployed


def _dry_run(s3_stub, manifest: dict | None = None, **payload) -> dict:
    environment_tests._version_with_manifest(s3_stub, manifest or {"training": {}})
    result = environment_tests._dry_run(**payload)
    assert result["status"] == "dry_run", result
    return result["request"]


def _refusal(sns_stub, **payload) -> list[str]:
    """The errors a dry run is refused with; the payload's own are found as it is read, before any dataset is."""
    environment_tests._expect_rejection_notice(sns_stub)
    result = environment_tests._dry_run(**payload)
    assert result["status"] == "rejected", result
    return result["errors"]


# --- managed MLflow ----------------------------------------------------------------------------------------------

def test_a_tracked_job_names_its_run_in_the_request_and_its_environment(deployed, s3_stub, sagemaker_stub):
    # Given a stack that tracks experiments in a managed MLflow tracking server
    deployed(mlflow_resource_arn=SERVER_ARN)
    # When a dry run plans a job on dataset "web search"
    request = _dry_run(s3_stub)
    # Then MlflowConfig names the server, the dataset's experiment and the job as the run
    assert request["MlflowConfig"] == {"MlflowResourceArn": SERVER_ARN, "MlflowExperimentName": "ranker-web search",
                                       "MlflowRunName": request["TrainingJobName"]}
    # and every process gets MLflow's own variables with the same server and experiment
    # (and bounds on how long MLflow's client insists on an unreachable server)
    assert request["Environment"] == {"MLFLOW_TRACKING_URI": SERVER_ARN, "MLFLOW_EXPERIMENT_NAME": "ranker-web search",
                                      "MODEL_S3_OUTPUT_PATH": "s3://ranker-artifacts-example/models/",
                                      "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "5", "MLFLOW_HTTP_REQUEST_TIMEOUT": "10"}
    assert service_model_errors(request) == []


def test_a_jobs_environment_may_give_mlflows_client_more_patience(deployed, s3_stub, sagemaker_stub):
    # Given a tracked stack / When a job's environment sets MLflow's retries itself
    deployed(mlflow_resource_arn=SERVER_ARN)
    environment = _dry_run(s3_stub, environment={"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "7"})["Environment"]
    # Then its setting wins, and the other bound stays the pipeline's
    assert (environment["MLFLOW_HTTP_REQUEST_MAX_RETRIES"], environment["MLFLOW_HTTP_REQUEST_TIMEOUT"]) == ("7", "10")


def test_a_manifest_names_another_experiment_and_a_payload_overrides_it(deployed, s3_stub, sagemaker_stub):
    deployed(mlflow_resource_arn=APP_ARN)
    manifest = {"training": {"mlflow_experiment_name": "web-search-ablations"}}
    assert _dry_run(s3_stub, manifest)["MlflowConfig"]["MlflowExperimentName"] == "web-search-ablations"
    request = _dry_run(s3_stub, manifest, mlflow_experiment_name="web-search-2027")
    assert request["MlflowConfig"]["MlflowExperimentName"] == "web-search-2027"
    assert request["Environment"]["MLFLOW_EXPERIMENT_NAME"] == "web-search-2027"


def test_a_stack_without_mlflow_sends_neither_the_config_nor_the_variables(deployed, s3_stub, sagemaker_stub):
    request = _dry_run(s3_stub)
    assert "MlflowConfig" not in request
    assert "Environment" not in request


def test_an_experiment_name_without_a_tracking_server_is_refused_before_any_call(deployed, s3_stub, sns_stub,
                                                                                  sagemaker_stub):
    errors = _refusal(sns_stub, mlflow_experiment_name="ablations")
    assert any("mlflow_experiment_name='ablations': the pipeline tracks no experiments (its mlflow_resource_arn is "
               "unset)" in error for error in errors), errors


@pytest.mark.parametrize(("name", "expected"), [
    ("", "mlflow_experiment_name='' is not a name of 1 to 256 characters"),
    ("x" * 257, "is not a name of 1 to 256 characters"),
    (7, "mlflow_experiment_name=7 is not a name of 1 to 256 characters"),
])
def test_a_bad_experiment_name_is_refused_naming_the_field(name, expected, deployed, s3_stub, sns_stub,
                                                           sagemaker_stub):
    deployed(mlflow_resource_arn=SERVER_ARN)
    errors = _refusal(sns_stub, mlflow_experiment_name=name)
    assert any(expected in error for error in errors), errors


def test_tracking_variables_set_by_hand_on_a_tracked_job_are_refused(deployed, s3_stub, sns_stub, sagemaker_stub):
    deployed(mlflow_resource_arn=SERVER_ARN)
    environment_tests._version_with_manifest(s3_stub, {"training": {}})
    errors = _refusal(sns_stub, environment={"MLFLOW_TRACKING_URI": "http://10.0.0.8:5000"})
    assert ("environment.MLFLOW_TRACKING_URI is set by the pipeline from its mlflow_resource_arn and the job's "
            "experiment: remove it (name another experiment with mlflow_experiment_name)") in errors


def test_without_a_managed_server_a_job_may_point_mlflow_at_its_own(deployed, s3_stub, sagemaker_stub):
    request = _dry_run(s3_stub, environment={"MLFLOW_TRACKING_URI": "http://mlflow.internal:5000"})
    assert request["Environment"] == {"MLFLOW_TRACKING_URI": "http://mlflow.internal:5000"}
    assert "MlflowConfig" not in request


@pytest.mark.parametrize("arn", [SERVER_ARN, APP_ARN])
def test_both_kinds_of_managed_mlflow_are_accepted(arn):
    assert resource_arn_errors(arn, "mlflow_resource_arn", region="eu-west-1", arn_pattern=ARN_PATTERN) == []


@pytest.mark.parametrize(("arn", "expected"), [
    ("ranking", "mlflow_resource_arn='ranking' is not a SageMaker managed MLflow ARN"),
    ("arn:aws:sagemaker:eu-west-1:123456789012:mlflow-tracking-server/", "is not a SageMaker managed MLflow ARN"),
    ("arn:aws:sagemaker:eu-west-1:1234:mlflow-app/app-1", "is not a SageMaker managed MLflow ARN"),
    ("arn:aws:sagemaker:eu-west-1:123456789012:model-package-group/ranker", "is not a SageMaker managed MLflow ARN"),
    ("arn:aws:sagemaker:eu-west-1:123456789012:mlflow-experiment/ranking",
     "names a 'mlflow-experiment', not one of ['mlflow-tracking-server', 'mlflow-app']"),
    ("arn:aws:sagemaker:us-east-1:123456789012:mlflow-app/app-1",
     "is in region 'us-east-1', not the stack's 'eu-west-1'"),
])
def test_an_arn_of_anything_else_is_refused_naming_the_field_and_the_fix(arn, expected):
    [error] = resource_arn_errors(arn, "mlflow_resource_arn", region="eu-west-1", arn_pattern=ARN_PATTERN)
    assert expected in error
    assert "DescribeMlflowTrackingServer" in error or "region" in error


def test_a_bad_arn_in_the_settings_file_is_a_deployment_error():
    with pytest.raises(SettingsError, match="mlflow_resource_arn='arn:aws:sagemaker:eu-west-1:123456789012:"
                                            "mlflow-experiment/x' names a 'mlflow-experiment'"):
        stack_settings(mlflow_resource_arn="arn:aws:sagemaker:eu-west-1:123456789012:mlflow-experiment/x")


def test_a_tuning_jobs_trials_log_through_the_variables_alone(deployed, s3_stub, sagemaker_stub):
    # Given a tracked stack and a tuning job (botocore's HyperParameterTrainingJobDefinition has no MlflowConfig)
    deployed(mlflow_resource_arn=SERVER_ARN)
    request = _dry_run(s3_stub, tuning={"ranges": {"learning-rate": {"type": "continuous", "min": 0.0001, "max": 0.01}}})
    # Then every trial gets the server and the experiment, and the API model accepts the request
    definition = request["TrainingJobDefinition"]
    assert definition["Environment"] == {"MLFLOW_TRACKING_URI": SERVER_ARN,
                                         "MLFLOW_EXPERIMENT_NAME": "ranker-web search",
                                         "MODEL_S3_OUTPUT_PATH": "s3://ranker-artifacts-example/models/",
                                         "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "5", "MLFLOW_HTTP_REQUEST_TIMEOUT": "10"}
    assert "MlflowConfig" not in definition and "MlflowConfig" not in request
    assert service_model_errors(request, "CreateHyperParameterTuningJob") == []


# --- the cluster health check ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("mode", "count", "expected"), [
    ("multi_instance", 1, None), ("multi_instance", 2, {"EnableInfraCheck": True}),
    ("always", 1, {"EnableInfraCheck": True}), ("never", 4, None),
])
def test_the_stacks_mode_decides_which_jobs_run_the_check(mode, count, expected, deployed, s3_stub,
                                                          sagemaker_stub):
    deployed(infra_check=mode)
    request = _dry_run(s3_stub, instance_count=count)
    assert request.get("InfraCheckConfig") == expected
    assert service_model_errors(request) == []


def test_a_manifest_turns_the_check_on_and_a_payload_off(deployed, s3_stub, sagemaker_stub):
    manifest = {"training": {"infra_check": True}}
    assert _dry_run(s3_stub, manifest)["InfraCheckConfig"] == {"EnableInfraCheck": True}
    assert "InfraCheckConfig" not in _dry_run(s3_stub, manifest, instance_count=2, infra_check=False)


def test_a_check_that_is_not_a_boolean_is_refused(deployed, s3_stub, sns_stub, sagemaker_stub):
    errors = _refusal(sns_stub, infra_check="yes")
    assert any("infra_check='yes' is not true or false: use a JSON boolean" in error for error in errors), errors


def test_an_unknown_stack_mode_is_a_deployment_error():
    with pytest.raises(SettingsError, match=r"infra_check='sometimes' is not one of \['multi_instance', 'always', "
                                            r"'never'\]"):
        stack_settings(infra_check="sometimes")


def test_the_tuning_definition_carries_neither_field_the_api_lacks():
    # Given a two-instance tracked job planned as a tuning job's trials
    settings = stack_settings(mlflow_resource_arn=SERVER_ARN)
    planned = _planned_tuning_spec(settings)
    # When both requests are built
    training, tuning = build_training_job_request(planned, settings), build_tuning_job_request(planned, settings)
    # Then the training request has both, the tuning definition neither, and preflight passes them
    assert training["InfraCheckConfig"] == {"EnableInfraCheck": True} and "MlflowConfig" in training
    assert not {"InfraCheckConfig", "MlflowConfig"} & set(tuning["TrainingJobDefinition"])
    assert not [error for error in tuning_preflight_errors(tuning, training, planned, settings)
                if "Mlflow" in error or "InfraCheck" in error]


def _planned_tuning_spec(settings):
    section = parse_tuning_section({"ranges": {"learning-rate": {"type": "continuous", "min": 0.0001, "max": 0.01}}}, "tuning")
    tuning = resolve_tuning(section, entry_point="train_ddp.py", settings=settings, where="tuning",
                            hyperparameters={})
    run = MlflowRun(SERVER_ARN, "ranker-web search", "ranker-web-search-t", settings.output_s3_uri)
    return job_spec(job_name="ranker-web-search-t", instance_count=2, distribution="none", tuning=tuning,
                    infra_check=True, mlflow=run, environment=run.environment())


def test_the_variables_the_trigger_sets_are_the_ones_the_training_code_reads():
    assert experiment_tracking.TRACKING_VARIABLES == (tracking.TRACKING_URI_VARIABLE, tracking.EXPERIMENT_VARIABLE,
                                                      tracking.OUTPUT_PATH_VARIABLE)
