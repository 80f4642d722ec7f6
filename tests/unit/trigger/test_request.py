"""The pure request builder: every distribution mode and every production option."""

from __future__ import annotations

import json
import re

import pytest
from ranker.log_format import format_metrics, parse_metrics
from training_trigger.request import build_training_job_request

from trigger.sample_inputs import job_spec, stack_settings


def _decoded(request):
    return {key: json.loads(value) for key, value in request["HyperParameters"].items()}


def test_every_hyperparameter_value_is_json_encoded_like_the_sdk(settings):
    request = build_training_job_request(job_spec(hyperparameters={"epochs": 3, "loss": "listnet", "amp": True,
                                                                   "learning-rate": 0.001}), settings)
    hyperparameters = request["HyperParameters"]
    assert hyperparameters["epochs"] == "3"
    assert hyperparameters["loss"] == '"listnet"'
    assert hyperparameters["amp"] == "true"
    assert hyperparameters["learning-rate"] == "0.001"
    assert hyperparameters["sagemaker_program"] == '"train_ddp.py"'
    assert hyperparameters["sagemaker_container_log_level"] == "20"


def test_script_mode_keys_point_at_the_bundle_and_the_job(settings):
    spec = job_spec()
    decoded = _decoded(build_training_job_request(spec, settings))
    assert decoded["sagemaker_submit_directory"] == settings.source_bundle_uri
    assert decoded["sagemaker_job_name"] == spec.job_name
    assert decoded["sagemaker_region"] == settings.region


@pytest.mark.parametrize(
    ("distribution", "expected"),
    [
        ("none", {}),
        ("pytorchddp", {"sagemaker_distributed_dataparallel_enabled": True,
                        "sagemaker_distributed_dataparallel_custom_mpi_options": "",
                        "sagemaker_instance_type": "ml.p4d.24xlarge"}),
        ("smdistributed", {"sagemaker_distributed_dataparallel_enabled": True,
                           "sagemaker_distributed_dataparallel_custom_mpi_options": "",
                           "sagemaker_instance_type": "ml.p4d.24xlarge"}),
        ("torch_distributed", {"sagemaker_torch_distributed_enabled": True,
                               "sagemaker_instance_type": "ml.p4d.24xlarge"}),
    ],
)
def test_each_distribution_mode_adds_exactly_its_keys(settings, distribution, expected):
    # Given a job in one distribution mode
    spec = job_spec(distribution=distribution, instance_type="ml.p4d.24xlarge")
    # When the request is built
    decoded = _decoded(build_training_job_request(spec, settings))
    # Then the mode's keys are there and no other mode's
    script_mode = {"sagemaker_submit_directory", "sagemaker_program", "sagemaker_container_log_level",
                   "sagemaker_job_name", "sagemaker_region"}
    mode_keys = {key: value for key, value in decoded.items() if key.startswith("sagemaker_")
                 and key not in script_mode}
    assert mode_keys == expected


def test_sdk_defaults_for_channels_resources_and_stopping(settings):
    spec = job_spec()
    request = build_training_job_request(spec, settings)
    assert [channel["ChannelName"] for channel in request["InputDataConfig"]] == list(spec.channels)
    s3 = request["InputDataConfig"][0]["DataSource"]["S3DataSource"]
    assert s3 == {"S3DataType": "S3Prefix", "S3Uri": spec.channels["train"],
                  "S3DataDistributionType": "FullyReplicated"}
    assert request["ResourceConfig"] == {"InstanceType": spec.instance_type, "InstanceCount": 1,
                                         "VolumeSizeInGB": settings.volume_size_gb}
    assert request["StoppingCondition"] == {"MaxRuntimeInSeconds": spec.max_runtime}
    assert request["AlgorithmSpecification"]["TrainingInputMode"] == "File"
    assert request["AlgorithmSpecification"]["EnableSageMakerMetricsTimeSeries"] is True
    assert request["OutputDataConfig"] == {"S3OutputPath": settings.output_s3_uri}
    assert request["EnableManagedSpotTraining"] is False
    assert "VpcConfig" not in request and "RetryStrategy" not in request


def test_checkpoints_go_to_a_per_job_prefix(settings):
    spec = job_spec()
    checkpoint = build_training_job_request(spec, settings)["CheckpointConfig"]
    assert checkpoint == {"S3Uri": f"{settings.checkpoint_s3_uri}{spec.job_name}/", "LocalPath": "/opt/ml/checkpoints"}


def test_spot_sets_the_wait_limit():
    settings = stack_settings(use_spot=True, max_wait_seconds=100000)
    request = build_training_job_request(job_spec(spot=True, max_runtime=3600), settings)
    assert request["EnableManagedSpotTraining"] is True
    assert request["StoppingCondition"] == {"MaxRuntimeInSeconds": 3600, "MaxWaitTimeInSeconds": 100000}


def test_production_options_reach_the_request():
    # Given a stack with VPC, KMS, isolation, encryption, warm pool, retries and FastFile input
    settings = stack_settings(subnet_ids=["subnet-0a1b", "subnet-2c3d"], security_group_ids=["sg-0f1e"],
                              KMS_KEY_ARN="arn:aws:kms:eu-west-1:123456789012:key/1234abcd",
                              enable_inter_container_encryption=True, keep_alive_seconds=900,
                              job_retry_attempts=2, input_mode="FastFile")
    # When a job on an instance without local NVMe is built
    request = build_training_job_request(job_spec(instance_type="ml.p3.8xlarge"), settings)
    # Then each option is in its field
    assert request["VpcConfig"] == {"Subnets": ["subnet-0a1b", "subnet-2c3d"], "SecurityGroupIds": ["sg-0f1e"]}
    assert request["OutputDataConfig"]["KmsKeyId"] == settings.kms_key_arn
    assert request["ResourceConfig"]["VolumeKmsKeyId"] == settings.kms_key_arn
    assert request["ResourceConfig"]["KeepAlivePeriodInSeconds"] == 900
    assert request["RetryStrategy"] == {"MaximumRetryAttempts": 2}
    assert request["EnableInterContainerTrafficEncryption"] is True
    assert request["AlgorithmSpecification"]["TrainingInputMode"] == "FastFile"


def test_no_volume_key_for_instances_with_local_nvme():
    settings = stack_settings(KMS_KEY_ARN="arn:aws:kms:eu-west-1:123456789012:key/1234abcd")
    request = build_training_job_request(job_spec(instance_type="ml.p4d.24xlarge"), settings)
    assert "VolumeKmsKeyId" not in request["ResourceConfig"]
    assert request["OutputDataConfig"]["KmsKeyId"] == settings.kms_key_arn


def test_network_isolation_ships_the_code_as_a_channel_like_the_sdk():
    settings = stack_settings(enable_network_isolation=True)
    request = build_training_job_request(job_spec(), settings)
    code = request["InputDataConfig"][-1]
    assert code["ChannelName"] == "code"
    assert code["DataSource"]["S3DataSource"]["S3Uri"] == settings.source_bundle_uri
    assert _decoded(request)["sagemaker_submit_directory"] == "/opt/ml/input/data/code/sourcedir.tar.gz"
    assert request["EnableNetworkIsolation"] is True


def test_metric_definitions_capture_what_the_scripts_print(settings):
    # Given a log line printed through the shared formatter
    printed = {"epoch": 3, "step": 120, "train_loss": 0.41, "val_ndcg@10": 0.74}
    line = format_metrics(printed)
    # When SageMaker applies the request's regexes to it
    definitions = build_training_job_request(job_spec(), settings)["AlgorithmSpecification"]["MetricDefinitions"]
    captured = {d["Name"]: float(m.group(1)) for d in definitions if (m := re.search(d["Regex"], line))}
    # Then it captures every printed metric
    assert captured == parse_metrics(line) == pytest.approx(printed)


def test_tags_carry_the_specs_tags(settings):
    spec = job_spec()
    assert build_training_job_request(spec, settings)["Tags"] == [{"Key": k, "Value": v} for k, v in spec.tags.items()]


def test_tensorboard_uploads_the_scripts_log_folder_beside_the_jobs_artifacts(settings):
    from training_trigger.preflight import service_model_errors

    spec = job_spec(tensorboard=True)
    request = build_training_job_request(spec, settings)
    assert request["TensorBoardOutputConfig"] == {
        "S3OutputPath": f"{settings.output_s3_uri.rstrip('/')}/{spec.job_name}/tensorboard/",
        "LocalPath": "/opt/ml/output/tensorboard"}
    assert service_model_errors(request) == []
    # under the prefix the execution role may write (stacks/execution_role.py: the model and checkpoint prefixes)
    assert request["TensorBoardOutputConfig"]["S3OutputPath"].startswith(settings.output_s3_uri)
    without = build_training_job_request(job_spec(), settings)
    assert "TensorBoardOutputConfig" not in without and service_model_errors(without) == []


def _distributions(request) -> dict[str, str]:
    return {channel["ChannelName"]: channel["DataSource"]["S3DataSource"]["S3DataDistributionType"]
            for channel in request["InputDataConfig"]}


def test_a_sharded_job_shards_its_train_channel_only():
    # Given a job whose train channel is sharded across hosts, with validation, test and (isolated) a code channel
    spec = job_spec(train_data_distribution="ShardedByS3Key", instance_count=2,
                    channels={name: f"s3://ranker-data-example/datasets/web/v1/{name}/"
                              for name in ("train", "validation", "test")})
    # When the request is built
    request = build_training_job_request(spec, stack_settings(enable_network_isolation=True))
    # Then each host gets a share of the training objects, and every host all of the rest
    assert _distributions(request) == {"train": "ShardedByS3Key", "validation": "FullyReplicated",
                                       "test": "FullyReplicated", "code": "FullyReplicated"}


def test_the_training_definition_is_what_a_tuning_job_takes(settings):
    # Given a job with every optional member: VPC, retries, spot, KMS, environment
    from botocore.session import get_session
    from botocore.validate import ParamValidator
    from training_trigger.request import training_job_definition

    settings = stack_settings(subnet_ids=["subnet-0a1b"], security_group_ids=["sg-0f1e"], job_retry_attempts=2,
                              KMS_KEY_ARN="arn:aws:kms:eu-west-1:123456789012:key/1a2b")
    spec = job_spec(spot=True, environment={"NCCL_DEBUG": "INFO"}, train_data_distribution="ShardedByS3Key")
    # When the shared part is built
    definition = training_job_definition(spec, settings)
    # Then CreateHyperParameterTuningJob's training definition takes it as it is, and CreateTrainingJob's request
    # adds only the members a tuning job names otherwise or sets itself
    shape = get_session().get_service_model("sagemaker").shape_for("HyperParameterTrainingJobDefinition")
    report = ParamValidator().validate(definition, shape)
    assert not report.has_errors(), report.generate_report()
    assert set(build_training_job_request(spec, settings)) - set(definition) == {"TrainingJobName", "HyperParameters",
                                                                                 "Tags"}
