"""Two per-job settings with a stack default: the job's environment (the stack's `default_environment`, a
manifest's and a manual payload's `environment`, merged in that order into CreateTrainingJob's `Environment`, and
checked before any call against SageMaker's own limits, read from botocore's model, and the names the platform owns),
and how the train channel is spread over the hosts (`train_data_distribution`).

The trigger's service runs with botocore Stubbers on the real clients: a call no test queued fails the test, which is how
"refused before any call" is proven.
"""

from __future__ import annotations

import ast
import datetime as dt
import io
import json
import re
from pathlib import Path

import botocore.session
import pytest
from botocore.response import StreamingBody
from botocore.stub import ANY
from training_trigger.service import handle_event
from training_trigger.job_environment import OWNED_NAMES, create_training_job_limits, environment_errors
from training_trigger.settings import SettingsError, load_settings

from trigger.sample_inputs import DATA_BUCKET, TOPIC_ARN, stack_settings, write_stack_settings

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics:UserWarning")

VERSION_ROOT = "datasets/web search/2026-11-01/"
MODEL = botocore.session.get_session().get_service_model("sagemaker")
TORCHRUN = {"default_distribution": "torch_distributed", "default_instance_type": "ml.g5.12xlarge"}
ENVIRONMENT_SHAPE = MODEL.operation_model("CreateTrainingJob").input_shape.members["Environment"]


@pytest.fixture
def deployed(monkeypatch, tmp_path):
    """Deploys the trigger with the stack's settings file changed by the keyword arguments."""
    def deploy(**static_changes):
        for name, value in write_stack_settings(tmp_path, **static_changes).items():
            monkeypatch.setenv(name, value)
        load_settings.cache_clear()

    deploy()
    yield deploy
    load_settings.cache_clear()


def _version_with_manifest(s3_stub, manifest: dict) -> None:
    body = json.dumps(manifest).encode()
    s3_stub.add_response("list_objects_v2", {
        "Contents": [{"Key": f"{VERSION_ROOT}manifest.json", "ETag": '"7b4ef1a3d1e26c2b5e0f3e9d7c1a8b42"',
                      "Size": len(body), "LastModified": dt.datetime(2026, 11, 1, 6, 12, tzinfo=dt.timezone.utc)}],
        "CommonPrefixes": [{"Prefix": f"{VERSION_ROOT}train/"}]},
        {"Bucket": DATA_BUCKET, "Prefix": VERSION_ROOT, "Delimiter": "/"})
    s3_stub.add_response("get_object", {"Body": StreamingBody(io.BytesIO(body), len(body))},
                         {"Bucket": DATA_BUCKET, "Key": f"{VERSION_ROOT}manifest.json"})


def _dry_run(**payload):
    return handle_event({"dataset": "web search", "version": "2026-11-01", "dry_run": True, **payload})


def _expect_rejection_notice(sns_stub):
    sns_stub.add_response("publish", {"MessageId": "5b1e6f2c-0d8a-4d7e-9f1a-2b3c4d5e6f70"},
                          {"TopicArn": TOPIC_ARN, "Subject": ANY, "Message": ANY})


def test_stack_manifest_and_payload_environments_merge_in_that_order(deployed, s3_stub, sagemaker_stub):
    # Given a torchrun stack that debugs NCCL for every job, and a version whose manifest narrows it and adds its own
    deployed(default_environment={"NCCL_DEBUG": "INFO", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
             **TORCHRUN)
    _version_with_manifest(s3_stub, {"training": {"environment": {"NCCL_DEBUG": "WARN",
                                                                  "NCCL_DEBUG_SUBSYS": "INIT,NET"}}})
    # When a manual dry run on it sets one more and overrides one again
    result = _dry_run(environment={"NCCL_DEBUG_SUBSYS": "COLL", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"})
    # Then every layer is there, the later one winning key by key
    assert result["status"] == "dry_run", result
    assert result["request"]["Environment"] == {"NCCL_DEBUG": "WARN", "PYTORCH_CUDA_ALLOC_CONF":
                                                "expandable_segments:True", "NCCL_DEBUG_SUBSYS": "COLL",
                                                "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"}


def test_a_job_without_any_environment_sends_none(s3_stub, sagemaker_stub, deployed):
    _version_with_manifest(s3_stub, {"training": {}})
    assert "Environment" not in _dry_run()["request"]


def _started_by_marker(s3_stub, sagemaker_stub, manifest: dict) -> dict:
    """The CreateTrainingJob request the marker event of a version with `manifest` sends (SageMaker accepting it)."""
    _version_with_manifest(s3_stub, manifest)
    sent = []
    sagemaker_stub.client.meta.events.register_first("before-parameter-build.sagemaker.CreateTrainingJob",
                                                     lambda params, **_: sent.append(params))
    sagemaker_stub.add_response("create_training_job", {"TrainingJobArn": "arn:aws:sagemaker:eu-west-1:"
                                                        "123456789012:training-job/ranker-x"})
    result = handle_event({"Records": [{
        "eventSource": "aws:s3", "eventName": "ObjectCreated:Put", "s3": {
            "bucket": {"name": DATA_BUCKET},
            "object": {"key": f"{VERSION_ROOT}manifest.json".replace(" ", "+"), "eTag": "7b4ef1a3"}}}]})
    assert result["status"] == "started", result
    return sent[0]


def test_a_manifest_environment_reaches_the_started_job(s3_stub, sagemaker_stub, deployed):
    # Given the manifest, on a torchrun stack
    deployed(**TORCHRUN)
    # When its marker's event arrives / Then CreateTrainingJob carries it
    request = _started_by_marker(s3_stub, sagemaker_stub, {"training": {"environment": {"NCCL_DEBUG": "INFO"}}})
    assert request["Environment"] == {"NCCL_DEBUG": "INFO"}


@pytest.mark.parametrize(("environment", "expected"), [
    ({"SM_CHANNEL_TRAIN": "/data"}, "environment.SM_CHANNEL_TRAIN is set by the SageMaker training toolkit"),
    ({"SAGEMAKER_PROGRAM": "x.py"}, "environment.SAGEMAKER_PROGRAM is set by SageMaker and its training toolkit"),
    ({"RANK": "0"}, "environment.RANK is set by the launcher (torchrun, mpirun)"),
    ({"AWS_SECRET_ACCESS_KEY": "k"}, "environment.AWS_SECRET_ACCESS_KEY is set by the job's execution role"),
    ({"LD_LIBRARY_PATH": "/opt"}, "environment.LD_LIBRARY_PATH is set by the AWS PyTorch image"),
    ({"NCCL_SOCKET_IFNAME": "eth1"}, "environment.NCCL_SOCKET_IFNAME is set by the toolkit's SMDDP launcher under "
                                     "distribution 'pytorchddp'"),
    ({"2FAST": "1"}, "environment: '2FAST' is not a variable name SageMaker accepts"),
    ({"LONG": "x" * 513}, "environment.LONG: the value is 513 characters, over SageMaker's 512"),
    ({f"VAR_{index}": "1" for index in range(101)}, "environment: 101 variables exceed SageMaker's 100 per job"),
])
def test_refused_names_and_over_limit_maps_fail_a_dry_run_before_any_call(environment, expected, deployed, s3_stub,
                                                                          sns_stub, sagemaker_stub):
    # Given a stack whose jobs run under SMDDP (the sample stack's default distribution)
    _version_with_manifest(s3_stub, {"training": {}})
    _expect_rejection_notice(sns_stub)
    # When a dry run asks for the environment (the SageMaker Stubber has nothing queued: any call fails the test)
    result = _dry_run(environment=environment)
    # Then it is rejected with one line naming the variable, the reason and the fix
    assert result["status"] == "rejected"
    assert any(error.startswith(expected) for error in result["errors"]), result["errors"]


@pytest.mark.parametrize(("environment", "expected"), [
    ({"NCCL_DEBUG": 1}, "payload.environment.NCCL_DEBUG=1 is not a string: environment values are text"),
    (["NCCL_DEBUG=INFO"], "payload.environment=['NCCL_DEBUG=INFO'] is not an object"),
])
def test_an_environment_that_is_not_text_by_name_is_refused_as_the_payload_is_read(environment, expected, deployed,
                                                                                   sns_stub, sagemaker_stub):
    _expect_rejection_notice(sns_stub)
    result = _dry_run(environment=environment)
    assert result["status"] == "rejected" and result["errors"][0].startswith(expected), result


COLLECTIVE_TIMEOUT = "SAGEMAKER_DISTRIBUTED_COLLECTIVE_TIMEOUT"
PACKAGE_DIR = Path(__file__).resolve().parents[3] / "training_code" / "sagemaker_distributed"


@pytest.mark.parametrize("distribution", ["pytorchddp", "torch_distributed"])
def test_the_collective_timeout_set_in_a_payload_reaches_the_request(distribution, deployed, s3_stub,
                                                                     sagemaker_stub):
    # Given a version on an SMDDP stack (the sample's) and one on a torchrun stack
    if distribution == "torch_distributed":
        deployed(**TORCHRUN)
    _version_with_manifest(s3_stub, {"training": {}})
    # When a dry run raises the collective timeout the package reads (docs/bring-your-own.md)
    result = _dry_run(environment={COLLECTIVE_TIMEOUT: "7200"})
    # Then it is accepted, though SAGEMAKER_* names are the platform's, and every process of the job gets it
    assert result["status"] == "dry_run", result
    assert result["request"]["Environment"] == {COLLECTIVE_TIMEOUT: "7200"}


def test_the_collective_timeout_from_the_stack_and_a_manifest_reaches_the_started_job(deployed, s3_stub,
                                                                                       sagemaker_stub):
    # Given a stack whose default raises it for every job, and a manifest that raises it further for its version
    deployed(default_environment={COLLECTIVE_TIMEOUT: "3600", "NCCL_DEBUG_SUBSYS": "INIT"})
    # When the version's marker arrives / Then CreateTrainingJob carries the manifest's value over the stack's
    request = _started_by_marker(s3_stub, sagemaker_stub, {"training": {"environment": {COLLECTIVE_TIMEOUT: "5400"}}})
    assert request["Environment"] == {COLLECTIVE_TIMEOUT: "5400", "NCCL_DEBUG_SUBSYS": "INIT"}


def _package_variable_names() -> set[str]:
    """Every `SAGEMAKER_DISTRIBUTED_*` name written in the package's source: the namespace of its own settings."""
    return {node.value for path in PACKAGE_DIR.rglob("*.py") for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and re.fullmatch(r"SAGEMAKER_DISTRIBUTED_[A-Z0-9_]+", node.value)}


def test_every_variable_the_package_reads_for_users_is_one_no_distribution_refuses():
    # Given the names the package's source holds in its own namespace (collective_timeout reads one of them)
    from training_trigger.job_environment import PACKAGE_SETTINGS

    names = _package_variable_names()
    limits = create_training_job_limits(MODEL)
    # Then each is a declared setting, and every declared setting passes the trigger's check under every distribution
    assert COLLECTIVE_TIMEOUT in names
    assert names == {setting.name for setting in PACKAGE_SETTINGS}
    for distribution in ("none", "torch_distributed", "pytorchddp", "smdistributed"):
        assert environment_errors({name: "3600" for name in names}, "environment", distribution=distribution,
                                  limits=limits) == []


def test_a_misspelt_package_setting_is_refused_naming_the_one_meant():
    errors = environment_errors({"SAGEMAKER_DISTRIBUTED_COLECTIVE_TIMEOUT": "60"}, "environment",
                                distribution="torch_distributed", limits=create_training_job_limits(MODEL))
    assert len(errors) == 1
    assert errors[0].startswith("environment.SAGEMAKER_DISTRIBUTED_COLECTIVE_TIMEOUT is set by SageMaker")
    assert errors[0].endswith(f"remove it, or did you mean {COLLECTIVE_TIMEOUT!r}, which sagemaker_distributed reads?")


def test_a_launcher_setting_is_refused_only_where_that_launcher_overwrites_it(deployed, s3_stub, sns_stub,
                                                                              sagemaker_stub):
    # Given NCCL_DEBUG, which the SMDDP launcher passes to every rank itself but torchrun leaves alone
    _version_with_manifest(s3_stub, {"training": {}})
    _expect_rejection_notice(sns_stub)
    under_smddp = _dry_run(environment={"NCCL_DEBUG": "WARN"})
    _version_with_manifest(s3_stub, {"training": {}})
    under_torchrun = _dry_run(environment={"NCCL_DEBUG": "WARN"}, distribution="torch_distributed",
                              instance_type="ml.g5.12xlarge")
    # Then the SMDDP job is refused saying why, and the torchrun job keeps it
    assert under_smddp["status"] == "rejected"
    assert "NCCL_DEBUG=INFO" in under_smddp["errors"][0]
    assert under_torchrun["request"]["Environment"] == {"NCCL_DEBUG": "WARN"}


def test_a_bad_default_environment_is_a_deployment_error():
    with pytest.raises(SettingsError, match="default_environment.NCCL_DEBUG=2 is not a string"):
        stack_settings(default_environment={"NCCL_DEBUG": 2})


def test_the_limits_are_the_api_models_own():
    # Given CreateTrainingJob's environment map in botocore's model, and a tuning definition's smaller one
    limits = create_training_job_limits(MODEL)
    tuning = MODEL.shape_for("HyperParameterTrainingJobDefinition").members["Environment"]
    # Then the check follows what the model says, not a copy of it
    assert (limits.max_variables, limits.max_name_length, limits.max_value_length) == (
        ENVIRONMENT_SHAPE.metadata["max"], ENVIRONMENT_SHAPE.key.metadata["max"],
        ENVIRONMENT_SHAPE.value.metadata["max"])
    assert tuning.metadata["max"] < limits.max_variables


def test_every_distribution_an_owned_name_names_is_one_the_pipeline_runs():
    from training_trigger.container_profiles import DISTRIBUTIONS

    named = {distribution for owned in OWNED_NAMES for distribution in owned.distributions or ()}
    assert named <= set(DISTRIBUTIONS)


def test_names_nobody_owns_pass_under_every_distribution():
    # Given the recipes docs/trigger.md gives
    recipes = {"NCCL_DEBUG_SUBSYS": "INIT,NET", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
               "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "NCCL_IB_DISABLE": "1", "OMP_NUM_THREADS": "4"}
    limits = create_training_job_limits(MODEL)
    # Then no distribution refuses them
    for distribution in ("none", "torch_distributed", "pytorchddp", "smdistributed"):
        assert environment_errors(recipes, "environment", distribution=distribution, limits=limits) == []


def _train_distribution(request) -> str:
    return next(channel["DataSource"]["S3DataSource"]["S3DataDistributionType"]
                for channel in request["InputDataConfig"] if channel["ChannelName"] == "train")


def test_the_stacks_train_data_distribution_is_the_default_a_manifest_and_a_payload_override(deployed, s3_stub,
                                                                                           sagemaker_stub):
    # Given a stack that shards the training channel of every job
    deployed(train_data_distribution="ShardedByS3Key")
    # When a version says nothing, a manifest asks for replication, and a payload shards again over that manifest
    _version_with_manifest(s3_stub, {"training": {}})
    default = _dry_run()["request"]
    _version_with_manifest(s3_stub, {"training": {"train_data_distribution": "FullyReplicated"}})
    manifest = _dry_run()["request"]
    _version_with_manifest(s3_stub, {"training": {"train_data_distribution": "FullyReplicated"}})
    payload = _dry_run(train_data_distribution="ShardedByS3Key")["request"]
    # Then each layer decides over the one below
    assert [_train_distribution(request) for request in (default, manifest, payload)] == [
        "ShardedByS3Key", "FullyReplicated", "ShardedByS3Key"]


def test_an_unknown_train_data_distribution_is_refused_naming_the_choices(deployed, sns_stub, sagemaker_stub):
    _expect_rejection_notice(sns_stub)
    result = _dry_run(train_data_distribution="ShardedByKey")
    assert result["errors"] == ["payload.train_data_distribution='ShardedByKey' is not one of ['FullyReplicated', "
                                "'ShardedByS3Key']: pick one of them"]
