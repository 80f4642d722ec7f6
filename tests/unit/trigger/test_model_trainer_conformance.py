"""The `model_trainer` launch's request and files equal what SageMaker Python SDK v3 (sagemaker-train, pinned in
constraints-sdk3.txt) sends and uploads for the same settings: CreateTrainingJob from
`ModelTrainer(source_code=SourceCode(...), compute=Compute(...), distributed=Torchrun() or None, ...).train()`, and
the files of its `code` and `sm_drivers` channels.

v3 shares the `sagemaker` namespace with the v2 of .venv, so ModelTrainer runs in the side environment .venv-sdk3
(model_trainer_capture.py, offline, the calls answered on the machine); the arguments a user would give it are built
here from the trigger's settings and job, one per field (docs/trigger.md lists the same mapping).
"""

from __future__ import annotations

import base64
import json
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from stacks.model_trainer_files import IGNORE_PATTERNS, drivers_channel_files, model_trainer_settings
from stacks.model_trainer_sdk import SDK3_VENV, model_trainer_sdk
from stacks.source_layout import PROJECT_ROOT, bundle_members
from training_trigger.experiment_tracking import MlflowRun
from training_trigger.model_trainer_layout import CODE_CHANNEL, DRIVERS_CHANNEL
from training_trigger.model_trainer_request import build_model_trainer_request
from training_trigger.request import CHECKPOINT_LOCAL_PATH, TENSORBOARD_LOCAL_PATH

from trigger.sample_inputs import job_spec, stack_settings

pytestmark = pytest.mark.slow  # ModelTrainer's import alone takes seconds
CAPTURE = Path(__file__).with_name("model_trainer_capture.py")
SOURCE_DIR = "training_code"
MEMBERS = bundle_members(PROJECT_ROOT / SOURCE_DIR, (PROJECT_ROOT / SOURCE_DIR / "sagemaker_distributed",))
KMS_KEY = "arn:aws:kms:eu-west-1:123456789012:key/1a2b"
DISTRIBUTIONS = ("none", "torch_distributed")
TRACKING_SERVER = "arn:aws:sagemaker:eu-west-1:123456789012:mlflow-tracking-server/ranking"
WARM_POOL = "warm pool"  # the other options a ModelTrainer sets with its with_* methods


def _production_job(distribution: str):
    """2 x ml.p4d.24xlarge on spot, with KMS, a VPC, isolation, encryption, an environment, a sharded train
    channel, the cluster health check and an MLflow run (its variables in the environment, as the trigger plans
    them), under the model_trainer launch."""
    settings = stack_settings(
        KMS_KEY_ARN=KMS_KEY, use_spot=True, max_wait_seconds=172800, subnet_ids=["subnet-0a1b", "subnet-2c3d"],
        security_group_ids=["sg-0f1e"], enable_network_isolation=True, enable_inter_container_encryption=True,
        input_mode="FastFile", default_launch="model_trainer",
        model_trainer=model_trainer_settings(MEMBERS, source_dir=SOURCE_DIR))
    spec = job_spec(distribution=distribution, instance_type="ml.p4d.24xlarge", instance_count=2, spot=True,
                    launch="model_trainer", train_data_distribution="ShardedByS3Key", infra_check=True,
                    hyperparameters={"epochs": 3, "loss": "listwise", "learning-rate": 0.001, "early-stopping": True})
    mlflow = MlflowRun(resource_arn=TRACKING_SERVER, experiment_name="ranker-web-search", run_name=spec.job_name,
                       output_s3_uri=settings.output_s3_uri)
    return settings, replace(spec, mlflow=mlflow, environment=mlflow.job_environment(
        {"NCCL_DEBUG": "INFO", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}))


def _warm_pool_job():
    """One host of train_lightning.py with a warm pool, retries, TensorBoard uploads and FastFile input (no spot,
    which warm pools exclude), under the model_trainer launch."""
    settings = stack_settings(keep_alive_seconds=1800, job_retry_attempts=3, input_mode="FastFile",
                              model_trainer=model_trainer_settings(MEMBERS, source_dir=SOURCE_DIR))
    spec = job_spec(entry_point="train_lightning.py", distribution="none", instance_type="ml.g5.2xlarge",
                    launch="model_trainer", tensorboard=True)
    return settings, spec


def _job(name: str):
    return _warm_pool_job() if name == WARM_POOL else _production_job(name)


def model_trainer_arguments(settings, spec) -> dict[str, Any]:
    """The ModelTrainer a user would write for this job: each argument from the trigger field it stands for."""
    volume_key = None if spec.instance_type == "ml.p4d.24xlarge" else settings.kms_key_arn  # local NVMe: no key
    return {
        "trainer": {
            "training_image": settings.training_image_uri,
            "training_input_mode": settings.input_mode,
            "source_code": {"source_dir": str(PROJECT_ROOT / SOURCE_DIR), "entry_script": spec.entry_point,
                            "requirements": "requirements.txt", "ignore_patterns": IGNORE_PATTERNS},
            "compute": {"instance_type": spec.instance_type, "instance_count": spec.instance_count,
                        "volume_size_in_gb": settings.volume_size_gb, "volume_kms_key_id": volume_key,
                        "enable_managed_spot_training": spec.spot,
                        "keep_alive_period_in_seconds": settings.keep_alive_seconds or None},
            "networking": {"subnets": list(settings.subnet_ids) or None,
                           "security_group_ids": list(settings.security_group_ids) or None,
                           "enable_network_isolation": settings.enable_network_isolation,
                           "enable_inter_container_traffic_encryption": settings.enable_inter_container_encryption},
            "stopping_condition": {"max_runtime_in_seconds": spec.max_runtime,
                                   "max_wait_time_in_seconds": settings.max_wait_seconds if spec.spot else None},
            "output_data_config": {"s3_output_path": settings.output_s3_uri, "kms_key_id": settings.kms_key_arn},
            "checkpoint_config": {"s3_uri": f"{settings.checkpoint_s3_uri}{spec.job_name}/",
                                  "local_path": CHECKPOINT_LOCAL_PATH},
            "torchrun": spec.distribution == "torch_distributed",
            "hyperparameters": dict(spec.hyperparameters),
            "environment": dict(spec.environment),
            "role": settings.role_arn,
            "tags": dict(spec.tags),
            "base_job_name": settings.job_name_prefix,
        },
        "metric_definitions": [dict(definition) for definition in settings.metric_definitions],
        "retry_attempts": settings.job_retry_attempts,
        "tensorboard": {"s3_output_path": f"{settings.output_s3_uri}{spec.job_name}/tensorboard/",
                        "local_path": TENSORBOARD_LOCAL_PATH} if spec.tensorboard else None,
        "infra_check": spec.infra_check,
        "channels": [[name, uri, spec.train_data_distribution if name == "train" else "FullyReplicated"]
                     for name, uri in spec.channels.items()],
    }


@pytest.fixture(scope="module")
def captured() -> dict[str, dict[str, Any]]:
    """What ModelTrainer sends and uploads for each distribution's production job, from one run of the SDK."""
    python = SDK3_VENV / "bin" / "python"
    if not python.exists():
        pytest.fail(f"{python} is missing: run `make setup` (it builds .venv-sdk3 from requirements-sdk3.txt)")
    jobs = [model_trainer_arguments(*_job(name)) for name in (*DISTRIBUTIONS, WARM_POOL)]
    result = subprocess.run([str(python), str(CAPTURE)], input=json.dumps(jobs), capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    return dict(zip((*DISTRIBUTIONS, WARM_POOL), json.loads(result.stdout)))


def _channel_files(capture: dict[str, Any], channel: str) -> dict[str, bytes]:
    """The files ModelTrainer uploaded for `channel`, by path inside it."""
    [uri] = [item["DataSource"]["S3DataSource"]["S3Uri"] for item in capture["request"]["InputDataConfig"]
             if item["ChannelName"] == channel]
    return {key.removeprefix(f"{uri}/"): base64.b64decode(body) for key, body in capture["uploads"].items()
            if key.startswith(f"{uri}/")}


def _without_upload_prefixes(request: dict[str, Any]) -> dict[str, Any]:
    """The request with its job name and the S3 prefixes of the channels the launch adds left out."""
    channels = [{**item, "DataSource": {"S3DataSource": {
        **item["DataSource"]["S3DataSource"], "S3Uri": "<upload prefix>"}}}
        if item["ChannelName"] in (CODE_CHANNEL, DRIVERS_CHANNEL) else item for item in request["InputDataConfig"]]
    return {**{key: value for key, value in request.items() if key != "TrainingJobName"}, "InputDataConfig": channels}


@pytest.mark.parametrize("job", [*DISTRIBUTIONS, WARM_POOL])
def test_the_request_is_the_one_model_trainer_sends(captured, job):
    # Given a production job on 2 x ml.p4d.24xlarge (spot, KMS, VPC, environment, sharded train channel) under each
    # driver, or one host with a warm pool, retries and TensorBoard uploads
    settings, spec = _job(job)
    # When the trigger builds the model_trainer launch's request, and ModelTrainer sends its own
    ours = build_model_trainer_request(spec, settings)
    sdk = captured[job]["request"]
    # Then they are equal field by field, apart from the job name and where each put its two channels' files, and
    # MlflowConfig, which ModelTrainer has no argument for (its with_* methods and constructor send none; the API
    # takes it from any CreateTrainingJob)
    assert set(ours) == set(sdk) | ({"MlflowConfig"} if spec.mlflow else set())
    ours_compared, sdk_compared = _without_upload_prefixes(ours), _without_upload_prefixes(sdk)
    for name in sdk_compared:
        assert ours_compared[name] == sdk_compared[name], name
    assert sdk["AlgorithmSpecification"]["ContainerEntrypoint"] == ["/bin/bash"]
    assert "sagemaker_program" not in ours["HyperParameters"]
    if job == WARM_POOL:
        assert (sdk["ResourceConfig"]["KeepAlivePeriodInSeconds"], sdk["RetryStrategy"]["MaximumRetryAttempts"],
                sdk["TensorBoardOutputConfig"]["LocalPath"]) == (1800, 3, TENSORBOARD_LOCAL_PATH)
        assert "InfraCheckConfig" not in ours and "MlflowConfig" not in ours
    else:  # with_infra_check_config(), and the run the job's variables name
        assert sdk["InfraCheckConfig"] == {"EnableInfraCheck": True}
        assert ours["MlflowConfig"] == {"MlflowResourceArn": TRACKING_SERVER, "MlflowExperimentName": "ranker-web-search",
                                        "MlflowRunName": spec.job_name}
        assert sdk["Environment"]["MLFLOW_TRACKING_URI"] == TRACKING_SERVER


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
def test_the_drivers_channel_holds_the_files_model_trainer_uploads(captured, distribution):
    # Given what ModelTrainer uploaded as the job's sm_drivers channel (bytecode caches aside: they are the machine's
    # that installed the SDK)
    uploaded = {name: data for name, data in _channel_files(captured[distribution], DRIVERS_CHANNEL).items()
                if "__pycache__" not in name}
    # When synthesis writes that channel for the same script and driver
    settings, spec = _production_job(distribution)
    ours = drivers_channel_files(model_trainer_sdk(), entry_script=spec.entry_point, distribution=distribution,
                                 source_dir=SOURCE_DIR, requirements="requirements.txt")
    # Then every file has the same bytes, sourcecode.json's source_dir aside (ModelTrainer writes the path of the
    # folder on the machine that called it, which the drivers never read)
    source_code, sdk_source_code = json.loads(ours.pop("sourcecode.json")), json.loads(uploaded.pop("sourcecode.json"))
    assert ours == uploaded
    assert {**sdk_source_code, "source_dir": SOURCE_DIR} == source_code
    assert sdk_source_code["entry_script"] == spec.entry_point


def test_the_code_channel_holds_the_bundles_files(captured):
    # Given what ModelTrainer uploaded as the code channel for SourceCode(source_dir=training_code, ignore_patterns=...)
    uploaded = _channel_files(captured["torch_distributed"], CODE_CHANNEL)
    # Then it is the job bundle's files, loose, with the same bytes: what synthesis deploys under code/
    assert uploaded == {name: path.read_bytes() for name, path in MEMBERS.items()}
