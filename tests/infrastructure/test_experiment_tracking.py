"""The stack's side of managed MLflow and the cluster health check: the configuration keys, checked at synthesis by
the trigger's own rules; the trigger's settings file; the execution role, which may log to that server or app and
no other; and a tracked pipeline that cdk-nag, cfn-lint and checkov pass."""

from __future__ import annotations

import typing

import pytest
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Template

from stacks.config import ConfigError, PipelineConfig, health_check
from stacks.execution_role import MLFLOW_RUN_ACTIONS, SageMakerExecutionRole
from stacks.model_trainer_files import launch_files
from stacks.model_trainer_sdk import model_trainer_sdk
from stacks.trigger_environment import trigger_static_settings

from . import test_template_checks as template_checks
from .iam_policy import allows, resolve
from .synthesis import PROJECT_ROOT, bare_stack, config_for, source_bundle_in, synthesize, synthesized_static_settings
from .test_constructs import DLC, _policy_statements

SERVER_ARN = "arn:aws:sagemaker:us-east-1:123456789012:mlflow-tracking-server/ranking"
APP_ARN = "arn:aws:sagemaker:us-east-1:123456789012:mlflow-app/app-7QBQXKZ3T2UH"
OTHER_SERVER_ARN = "arn:aws:sagemaker:us-east-1:123456789012:mlflow-tracking-server/someone-else"


def _role_statements(mlflow_resource_arn: str | None) -> list[dict]:
    stack = bare_stack()
    SageMakerExecutionRole(
        stack, "Role", data_bucket=s3.Bucket(stack, "Data"), dataset_prefix="datasets/",
        artifacts_bucket=s3.Bucket(stack, "Artifacts"), repository=ecr.Repository(stack, "Repo"), dlc_image=DLC,
        key=None, subnet_ids=(), security_group_ids=(), mlflow_resource_arn=mlflow_resource_arn)
    return resolve(_policy_statements(Template.from_stack(stack)), region="us-east-1")


def test_the_role_logs_runs_to_the_configured_server_and_no_other() -> None:
    statements = _role_statements(SERVER_ARN)
    for action in MLFLOW_RUN_ACTIONS:
        assert allows(statements, action, SERVER_ARN), action
        assert not allows(statements, action, OTHER_SERVER_ARN), action
    # A tracking server's calls are authorized as sagemaker-mlflow actions alone, and nothing deletes a run
    assert not allows(statements, "sagemaker:CallMlflowAppApi", SERVER_ARN)
    assert not allows(statements, "sagemaker-mlflow:DeleteRun", SERVER_ARN)


def test_an_mlflow_app_also_lets_the_role_call_that_apps_api() -> None:
    statements = _role_statements(APP_ARN)
    assert allows(statements, "sagemaker:CallMlflowAppApi", APP_ARN)
    assert allows(statements, "sagemaker-mlflow:LogBatch", APP_ARN)
    assert not allows(statements, "sagemaker:CallMlflowAppApi", APP_ARN.replace("app-7Q", "app-8Q"))


def test_without_a_server_the_role_may_use_no_mlflow() -> None:
    statements = _role_statements(None)
    assert not any(str(action).startswith(("sagemaker-mlflow:", "sagemaker:CallMlflow"))
                   for statement in statements for action in
                   (statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]))


@pytest.mark.parametrize(("overrides", "named"), [
    ({"mlflow_resource_arn": "ranking"}, ["mlflow_resource_arn='ranking' is not a SageMaker managed MLflow ARN"]),
    ({"mlflow_resource_arn": SERVER_ARN.replace("us-east-1", "eu-west-1")},
     ["is in region 'eu-west-1', not the stack's 'us-east-1'"]),
    ({"mlflow_resource_arn": SERVER_ARN, "default_environment": {"MLFLOW_EXPERIMENT_NAME": "x"}},
     ["default_environment.MLFLOW_EXPERIMENT_NAME is set by the pipeline from mlflow_resource_arn"]),
    ({"infra_check": "sometimes"}, ["infra_check", "'multi_instance', 'always' or 'never'"]),
    ({"mlflow_resource_arn": SERVER_ARN, "enable_network_isolation": True},
     ["mlflow_resource_arn with enable_network_isolation=true", "could not reach the tracking server"]),
])
def test_a_bad_setting_stops_synthesis_naming_it(overrides: dict, named: list[str]) -> None:
    with pytest.raises(ConfigError) as error:
        config_for("dev", **overrides)
    for text in named:
        assert text in str(error.value)


def test_the_settings_reach_the_trigger() -> None:
    static = trigger_static_settings(config_for("dev", mlflow_resource_arn=APP_ARN, infra_check="always"),
                                     bundle_files=["train_lightning.py"], model_trainer={})
    assert (static["mlflow_resource_arn"], static["infra_check"]) == (APP_ARN, "always")
    untracked = trigger_static_settings(config_for("dev"), bundle_files=["train_lightning.py"], model_trainer={})
    assert (untracked["mlflow_resource_arn"], untracked["infra_check"]) == ("", "multi_instance")


@pytest.fixture(scope="module")
def tracked_app(tmp_path_factory: pytest.TempPathFactory):
    """The prod pipeline logging to a tracking server (cdk-nag runs in synthesis and raises on a finding)."""
    return synthesize(config_for("prod", mlflow_resource_arn=SERVER_ARN), tmp_path_factory.mktemp("synth-mlflow"))


def test_a_tracked_pipeline_passes_cdk_nag_and_its_trigger_reads_the_server(tracked_app) -> None:
    template_checks.test_every_cdk_nag_finding_is_acknowledged_with_a_reason(tracked_app)
    assert synthesized_static_settings(tracked_app)["mlflow_resource_arn"] == SERVER_ARN


def test_a_tracked_pipelines_jobs_install_the_tracking_packages(tracked_app) -> None:
    # Given the tracked pipeline / When its jobs' bundle is read back from cdk.out
    with source_bundle_in(tracked_app.out_dir, tracked_app.stateless) as bundle:
        names = sorted(member.name for member in bundle.getmembers() if member.isfile())
        requirements = bundle.extractfile("requirements.txt").read()
        tracking = bundle.extractfile("requirements-tracking.txt").read()
    # Then its requirements are the training code's, then the line naming the tracking file, which it holds
    training_code = PROJECT_ROOT / "training_code"
    assert requirements.startswith((training_code / "requirements.txt").read_bytes())
    assert requirements.splitlines()[-1] == b"-r requirements-tracking.txt"
    assert tracking == (training_code / "requirements-tracking.txt").read_bytes()
    assert {b"mlflow-skinny", b"sagemaker-mlflow"} <= {line.split(b"==")[0] for line in tracking.splitlines()}
    # and the trigger knows the bundle's files as they are
    assert synthesized_static_settings(tracked_app)["bundle_files"] == names


def test_a_tracked_stacks_model_trainer_launch_installs_the_tracking_packages_too() -> None:
    # Given a tracked stack's bundle / When the model_trainer launch's files are laid out from it
    members = config_for("dev", mlflow_resource_arn=SERVER_ARN).source_members()
    files = launch_files(members, source_dir="training_code", sdk=model_trainer_sdk())
    # Then its code channel holds the tracking file and the requirements.txt that names it, which the drivers install
    training_code = PROJECT_ROOT / "training_code"
    assert files["code/requirements-tracking.txt"] == (training_code / "requirements-tracking.txt").read_bytes()
    assert files["code/requirements.txt"].splitlines()[-1] == b"-r requirements-tracking.txt"
    assert "install_requirements.py requirements.txt" in files["sm_drivers/torchrun/train_ddp.py/sm_train.sh"].decode()


@pytest.mark.slow
def test_a_tracked_pipeline_passes_cfn_lint_and_checkov(tracked_app) -> None:
    template_checks.assert_cfn_lint_finds_no_errors(tracked_app)
    template_checks.assert_checkov_fails_no_check(tracked_app)


def test_the_stacks_modes_are_the_triggers() -> None:
    # The configuration's choices (a Literal, which docs/configuration.md lists) are the modes the trigger reads
    assert typing.get_args(PipelineConfig.model_fields["infra_check"].annotation) == health_check.MODES
