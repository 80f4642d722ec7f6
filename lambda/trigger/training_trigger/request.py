"""The CreateTrainingJob request, built exactly as the SageMaker Python SDK v2 `PyTorch` estimator builds it.

Pure: no AWS calls, so every mode and option is unit-tested, and tests/unit/trigger/test_sdk_conformance.py
compares the result field by field with what the real SDK sends for the same settings. The part a hyperparameter
tuning job's training definition shares with it is built on its own (`training_job_definition`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from training_trigger import health_check
from training_trigger.instances import has_local_nvme
from training_trigger.planning import FULLY_REPLICATED, TRAIN_CHANNEL, TrainingJobSpec
from training_trigger.settings import Settings

CHECKPOINT_LOCAL_PATH = "/opt/ml/checkpoints"
# Where the training scripts write TensorBoard logs inside SageMaker (SM_OUTPUT_DIR/tensorboard) and SageMaker's
# default LocalPath for TensorBoardOutputConfig.
TENSORBOARD_LOCAL_PATH = "/opt/ml/output/tensorboard"
# With network isolation the container cannot reach S3: the code arrives as the "code" input channel, as the SDK
# sends it, and sagemaker_submit_directory names the file inside that channel.
CODE_CHANNEL = "code"
CODE_CHANNEL_DIR = f"/opt/ml/input/data/{CODE_CHANNEL}"


def json_encode_hyperparameters(hyperparameters: Mapping[str, Any]) -> dict[str, str]:
    """The SDK's encoding: every value JSON-encoded, so 3 -> "3", "listnet" -> "\\"listnet\\"", True -> "true"."""
    return {str(key): json.dumps(value) for key, value in hyperparameters.items()}


def distribution_hyperparameters(distribution: str, instance_type: str) -> dict[str, Any]:
    """The per-mode keys the SDK adds; since SDK 2.221.1 `pytorchddp` is sent as smdistributed data parallel."""
    if distribution in ("pytorchddp", "smdistributed"):
        return {
            "sagemaker_distributed_dataparallel_enabled": True,
            "sagemaker_instance_type": instance_type,
            "sagemaker_distributed_dataparallel_custom_mpi_options": "",
        }
    if distribution == "torch_distributed":
        return {"sagemaker_torch_distributed_enabled": True, "sagemaker_instance_type": instance_type}
    return {}


def isolated_submit_directory(source_bundle_uri: str) -> str:
    """Where the code channel puts the bundle: SageMaker downloads each object of an S3Prefix channel under its key
    below the prefix, so a prefix that is the whole key arrives under the key's last segment. The SDK uploads
    `.../source/sourcedir.tar.gz` and sends `/opt/ml/input/data/code/sourcedir.tar.gz`; a CDK asset's key is
    `<asset hash>.gz`, and the toolkit unpacks any gzipped tar, whatever its name."""
    return f"{CODE_CHANNEL_DIR}/{source_bundle_uri.rsplit('/', 1)[-1]}"


def script_hyperparameters(spec: TrainingJobSpec, settings: Settings) -> dict[str, str]:
    """The job's hyperparameters and the script-mode keys the SDK adds, JSON-encoded as the SDK sends them."""
    script_mode = {
        "sagemaker_submit_directory": (isolated_submit_directory(settings.source_bundle_uri)
                                       if settings.enable_network_isolation else settings.source_bundle_uri),
        "sagemaker_program": spec.entry_point,
        "sagemaker_container_log_level": int(settings.container_log_level),
        "sagemaker_job_name": spec.job_name,
        "sagemaker_region": settings.region,
    }
    return json_encode_hyperparameters(
        {**spec.hyperparameters, **script_mode, **distribution_hyperparameters(spec.distribution, spec.instance_type)}
    )


def s3_channel(name: str, uri: str, distribution: str = FULLY_REPLICATED) -> dict[str, Any]:
    return {
        "ChannelName": name,
        "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": uri,
                                        "S3DataDistributionType": distribution}},
    }


def data_channels(spec: TrainingJobSpec) -> list[dict[str, Any]]:
    """The `train` channel spread as the job asks (a host's share, or all of it: the scripts split it by rank);
    validation and test are replicated, so every host scores the same."""
    return [s3_channel(name, uri, spec.train_data_distribution if name == TRAIN_CHANNEL else FULLY_REPLICATED)
            for name, uri in spec.channels.items()]


def _channels(spec: TrainingJobSpec, settings: Settings) -> list[dict[str, Any]]:
    """The data, and the code where the container cannot fetch it itself (replicated: every host runs the same)."""
    channels = data_channels(spec)
    if settings.enable_network_isolation:
        channels.append(s3_channel(CODE_CHANNEL, settings.source_bundle_uri))
    return channels


def training_job_definition(spec: TrainingJobSpec, settings: Settings) -> dict[str, Any]:
    """What CreateTrainingJob shares with a tuning job's `TrainingJobDefinition` (CreateHyperParameterTuningJob's
    HyperParameterTrainingJobDefinition), built once for both: algorithm, role, channels, output, resources,
    stopping condition, checkpoints, isolation, encryption and spot flags, VPC, retries and environment. Each caller
    adds what only its API has or names differently (here `TrainingJobName`, `HyperParameters`, `Tags`, ...)."""
    resources: dict[str, Any] = {
        "InstanceType": spec.instance_type,
        "InstanceCount": spec.instance_count,
        "VolumeSizeInGB": settings.volume_size_gb,
    }
    # Instances with local NVMe encrypt it in hardware, and CreateTrainingJob refuses a volume key for them.
    if settings.kms_key_arn and not has_local_nvme(spec.instance_type):
        resources["VolumeKmsKeyId"] = settings.kms_key_arn
    if settings.keep_alive_seconds:
        resources["KeepAlivePeriodInSeconds"] = settings.keep_alive_seconds
    stopping: dict[str, Any] = {"MaxRuntimeInSeconds": spec.max_runtime}
    if spec.spot:
        stopping["MaxWaitTimeInSeconds"] = settings.max_wait_seconds
    output: dict[str, Any] = {"S3OutputPath": settings.output_s3_uri}
    if settings.kms_key_arn:
        output["KmsKeyId"] = settings.kms_key_arn
    definition: dict[str, Any] = {
        "AlgorithmSpecification": {
            "TrainingImage": settings.training_image_uri,
            "TrainingInputMode": settings.input_mode,
            "MetricDefinitions": [dict(definition) for definition in settings.metric_definitions],
        },
        "RoleArn": settings.role_arn,
        "InputDataConfig": _channels(spec, settings),
        "OutputDataConfig": output,
        "ResourceConfig": resources,
        "StoppingCondition": stopping,
        # One prefix per job: SageMaker's own retries and spot restarts of this job resume from it.
        "CheckpointConfig": {"S3Uri": f"{settings.checkpoint_s3_uri.rstrip('/')}/{spec.job_name}/",
                             "LocalPath": CHECKPOINT_LOCAL_PATH},
        "EnableNetworkIsolation": settings.enable_network_isolation,
        "EnableInterContainerTrafficEncryption": settings.enable_inter_container_encryption,
        "EnableManagedSpotTraining": spec.spot,
    }
    if settings.subnet_ids:
        definition["VpcConfig"] = {"Subnets": list(settings.subnet_ids),
                                   "SecurityGroupIds": list(settings.security_group_ids)}
    if settings.job_retry_attempts:
        definition["RetryStrategy"] = {"MaximumRetryAttempts": settings.job_retry_attempts}
    if spec.environment:
        # As the SDK: the map as given, absent when the job sets none.
        definition["Environment"] = dict(spec.environment)
    return definition


def training_job_only_fields(spec: TrainingJobSpec, settings: Settings) -> dict[str, Any]:
    """What a training job has beside its definition, whichever launch starts it: its name, tags, TensorBoard
    upload, cluster health check and MLflow run (the last three have no place in a tuning job's training definition:
    botocore's HyperParameterTrainingJobDefinition)."""
    fields: dict[str, Any] = {"TrainingJobName": spec.job_name,
                              "Tags": [{"Key": key, "Value": value} for key, value in spec.tags.items()]}
    if spec.tensorboard:
        # Beside the job's model artifacts ({output}/{job}/output/model.tar.gz), which the execution role may write.
        fields["TensorBoardOutputConfig"] = {
            "S3OutputPath": f"{settings.output_s3_uri.rstrip('/')}/{spec.job_name}/tensorboard/",
            "LocalPath": TENSORBOARD_LOCAL_PATH}
    if spec.infra_check:
        fields["InfraCheckConfig"] = health_check.request_config()
    if spec.mlflow is not None:
        fields["MlflowConfig"] = spec.mlflow.request_config()
    return fields


def build_training_job_request(spec: TrainingJobSpec, settings: Settings) -> dict[str, Any]:
    """The keyword arguments of `sagemaker.create_training_job(**request)` for the `toolkit` launch."""
    definition = training_job_definition(spec, settings)
    return {
        "TrainingJobName": spec.job_name,  # first, as the SDK and the API reference list it
        "HyperParameters": script_hyperparameters(spec, settings),
        **definition,
        "AlgorithmSpecification": {**definition["AlgorithmSpecification"], "EnableSageMakerMetricsTimeSeries": True},
        **training_job_only_fields(spec, settings),
    }
