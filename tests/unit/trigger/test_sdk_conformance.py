"""Our request equals what the real SageMaker Python SDK v2 (sagemaker==2.257.7) sends for the same settings.

The SDK builds its request offline here: a `PyTorch` estimator on a `sagemaker.Session` whose SageMaker client is
a real botocore client behind a Stubber, with the request read off the client's parameter hook. The SDK is a test
dependency only; the trigger never imports it.
"""

from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

os.environ.setdefault("SAGEMAKER_SUPPRESS_V2_WARNING", "1")  # the SDK's v3 migration notice, on every estimator
sagemaker = pytest.importorskip("sagemaker", reason="the SageMaker Python SDK v2 is a test-only dependency")
from sagemaker.debugger import TensorBoardOutputConfig  # noqa: E402
from sagemaker.inputs import TrainingInput  # noqa: E402
from sagemaker.pytorch import PyTorch  # noqa: E402
from stacks.source_bundle import pack_members  # noqa: E402
from stacks.source_layout import bundle_members  # noqa: E402
from training_trigger.request import build_training_job_request  # noqa: E402

from trigger.sample_inputs import job_spec, stack_settings  # noqa: E402

# Importing the SDK alone takes seconds.
pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning:sagemaker.*")]
REGION = "eu-west-1"
# The SDK otherwise reports each fit() to an AWS telemetry endpoint.
SDK_CONFIG = {"SchemaVersion": "1.0", "SageMaker": {"PythonSDK": {"Modules": {"TelemetryOptOut": True}}}}
COMPARED_FIELDS = ("HyperParameters", "InputDataConfig", "ResourceConfig", "OutputDataConfig", "StoppingCondition",
                   "CheckpointConfig", "VpcConfig", "RetryStrategy", "TensorBoardOutputConfig", "Environment")


def _sdk_request(settings, spec, *, framework_version: str, source_dir: str | None = None,
                 dependencies: list[str] | None = None, code_location: str | None = None) -> dict[str, Any]:
    """What `PyTorch(...).fit(...)` sends to CreateTrainingJob for these settings; a local `source_dir` is packed
    and uploaded by the SDK to `code_location` (an S3 endpoint the caller provides)."""
    boto_session = boto3.Session(region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing")
    client = boto_session.client("sagemaker")
    sent: list[dict[str, Any]] = []
    client.meta.events.register_first("before-parameter-build.sagemaker.CreateTrainingJob",
                                      lambda params, **_: sent.append(dict(params)))
    distribution = {"none": None, "pytorchddp": {"pytorchddp": {"enabled": True}},
                    "smdistributed": {"smdistributed": {"dataparallel": {"enabled": True}}},
                    "torch_distributed": {"torch_distributed": {"enabled": True}}}[spec.distribution]
    with Stubber(client) as stubber:
        stubber.add_response("create_training_job", {"TrainingJobArn": f"arn:aws:sagemaker:{REGION}:123456789012:"
                                                                       f"training-job/{spec.job_name}"})
        session = sagemaker.Session(boto_session=boto_session, sagemaker_client=client, sagemaker_config=SDK_CONFIG)
        estimator = PyTorch(
            entry_point=spec.entry_point, source_dir=source_dir or settings.source_bundle_uri,
            dependencies=dependencies, code_location=code_location, role=settings.role_arn,
            framework_version=framework_version, py_version=settings.python_version,
            instance_type=spec.instance_type, instance_count=spec.instance_count, distribution=distribution,
            hyperparameters=dict(spec.hyperparameters), output_path=settings.output_s3_uri,
            checkpoint_s3_uri=f"{settings.checkpoint_s3_uri}{spec.job_name}/",
            checkpoint_local_path="/opt/ml/checkpoints",
            volume_size=settings.volume_size_gb, max_run=spec.max_runtime, input_mode=settings.input_mode,
            use_spot_instances=spec.spot, max_wait=settings.max_wait_seconds if spec.spot else None,
            subnets=list(settings.subnet_ids) or None, security_group_ids=list(settings.security_group_ids) or None,
            volume_kms_key=settings.kms_key_arn, output_kms_key=settings.kms_key_arn,
            enable_network_isolation=settings.enable_network_isolation,
            encrypt_inter_container_traffic=settings.enable_inter_container_encryption,
            max_retry_attempts=settings.job_retry_attempts or None,
            keep_alive_period_in_seconds=settings.keep_alive_seconds or None,
            metric_definitions=[dict(d) for d in settings.metric_definitions],
            environment=dict(spec.environment) or None,
            sagemaker_session=session, debugger_hook_config=False, disable_profiler=True,
            tensorboard_output_config=TensorBoardOutputConfig(
                s3_output_path=f"{settings.output_s3_uri}{spec.job_name}/tensorboard/",
                container_local_output_path="/opt/ml/output/tensorboard") if spec.tensorboard else None,
        )
        estimator.fit({name: TrainingInput(uri, distribution=spec.train_data_distribution if name == "train"
                                           else "FullyReplicated")
                       for name, uri in spec.channels.items()}, wait=False, logs=False, job_name=spec.job_name)
    [request] = sent
    return request


@pytest.mark.parametrize(
    ("distribution", "framework_version", "python_version", "instance_type", "count"),
    [
        ("none", "2.2.0", "py310", "ml.g5.2xlarge", 1),
        ("pytorchddp", "2.2.0", "py310", "ml.p4d.24xlarge", 2),
        ("smdistributed", "2.2.0", "py310", "ml.p4de.24xlarge", 1),
        ("torch_distributed", "2.8.0", "py312", "ml.g5.12xlarge", 2),
    ],
)
def test_each_distribution_mode_matches_the_sdk(distribution, framework_version, python_version, instance_type, count):
    # Given the same job for the SDK and for the trigger
    settings = stack_settings(framework_version=framework_version, python_version=python_version)
    spec = job_spec(distribution=distribution, instance_type=instance_type, instance_count=count)
    # When both build the request
    sdk = _sdk_request(settings, spec, framework_version=framework_version)
    ours = build_training_job_request(spec, settings)
    # Then hyperparameters, channels, resources, output, stopping and checkpoints are equal
    for name in COMPARED_FIELDS:
        assert ours.get(name) == sdk.get(name), name
    assert ours["AlgorithmSpecification"]["TrainingInputMode"] == sdk["AlgorithmSpecification"]["TrainingInputMode"]
    assert ours["AlgorithmSpecification"]["EnableSageMakerMetricsTimeSeries"] is \
        sdk["AlgorithmSpecification"]["EnableSageMakerMetricsTimeSeries"]
    assert ours["AlgorithmSpecification"]["MetricDefinitions"] == sdk["AlgorithmSpecification"]["MetricDefinitions"]


def test_production_options_match_the_sdk():
    # Given spot, VPC, KMS (on an instance without local NVMe), isolation, encryption, retries, FastFile and TensorBoard
    settings = stack_settings(use_spot=True, max_wait_seconds=172800, subnet_ids=["subnet-0a1b", "subnet-2c3d"],
                              security_group_ids=["sg-0f1e"], KMS_KEY_ARN="arn:aws:kms:eu-west-1:123456789012:key/1a2b",
                              enable_network_isolation=True, enable_inter_container_encryption=True,
                              job_retry_attempts=3, input_mode="FastFile")
    spec = job_spec(distribution="torch_distributed", instance_type="ml.p3.8xlarge", instance_count=2, spot=True,
                    max_runtime=43200, tensorboard=True)
    # When both build the request
    sdk = _sdk_request(settings, spec, framework_version="2.2.0")
    ours = build_training_job_request(spec, settings)
    # Then every compared field and the flags agree
    for name in COMPARED_FIELDS:
        assert ours.get(name) == sdk.get(name), name
    for flag in ("EnableManagedSpotTraining", "EnableNetworkIsolation", "EnableInterContainerTrafficEncryption"):
        assert ours[flag] == sdk[flag], flag


def test_an_environment_and_a_sharded_train_channel_match_the_sdk():
    # Given a two-host job with environment variables and its training objects sharded across the hosts
    spec = job_spec(distribution="torch_distributed", instance_type="ml.g5.12xlarge", instance_count=2,
                    environment={"NCCL_DEBUG": "INFO", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
                    train_data_distribution="ShardedByS3Key")
    settings = stack_settings()
    # When the SDK (`PyTorch(environment=...)`, `TrainingInput(distribution=...)`) and the trigger build it
    sdk = _sdk_request(settings, spec, framework_version="2.2.0")
    ours = build_training_job_request(spec, settings)
    # Then the environment and the channels are the SDK's, as is every other compared field
    assert ours["Environment"] == sdk["Environment"] == dict(spec.environment)
    for name in COMPARED_FIELDS:
        assert ours.get(name) == sdk.get(name), name


def test_warm_pool_matches_the_sdk():
    settings = stack_settings(keep_alive_seconds=1800)
    spec = job_spec()
    sdk = _sdk_request(settings, spec, framework_version="2.2.0")
    assert build_training_job_request(spec, settings)["ResourceConfig"] == sdk["ResourceConfig"]


FOREIGN_CODE = Path(__file__).resolve().parents[2] / "fixtures" / "foreign_training_code"
CODE_BUCKET = "ranker-artifacts-example"


def test_a_foreign_source_dir_with_dependencies_matches_what_the_sdk_packs_and_sends(tmp_path):
    # Given a user's source folder, their script, and a dependency folder, as `PyTorch(source_dir=..., entry_point=...,
    # dependencies=[...])` takes them
    dependency = tmp_path / "sagemaker_distributed"
    dependency.mkdir()
    (dependency / "__init__.py").write_text('"""Process topology and backend choice for any training script."""\n')
    (dependency / "topology.py").write_text("import os\n\nWORLD_SIZE = int(os.environ.get('WORLD_SIZE', '1'))\n")
    spec = job_spec(entry_point="train.py", hyperparameters={"lr": 0.1, "optimizer": "sgd"},
                    distribution="torch_distributed", instance_type="ml.g5.12xlarge")
    # When the SDK packs, uploads (to a local S3) and submits the job
    with mock_aws():
        boto3.client("s3", region_name=REGION).create_bucket(
            Bucket=CODE_BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})
        sdk = _sdk_request(stack_settings(), spec, framework_version="2.2.0", source_dir=str(FOREIGN_CODE),
                           dependencies=[str(dependency)], code_location=f"s3://{CODE_BUCKET}/code")
        submitted = json.loads(sdk["HyperParameters"]["sagemaker_submit_directory"])
        bucket, key = submitted.removeprefix("s3://").split("/", 1)
        sdk_archive = boto3.client("s3", region_name=REGION).get_object(Bucket=bucket, Key=key)["Body"].read()
    # And the stack packs the same folders, and the trigger builds the request for the bundle it uploaded
    members = bundle_members(FOREIGN_CODE, (dependency,))
    ours_archive = pack_members(members, tmp_path / "sourcedir.tar.gz").read_bytes()
    settings = stack_settings(SOURCE_BUNDLE_URI=submitted, bundle_files=sorted(members), default_entry_point="train.py",
                              checked_entry_points=[], training_flags={})
    ours = build_training_job_request(spec, settings)
    # Then both archives hold the same files with the same bytes, and the requests agree field by field
    assert _archive_files(ours_archive) == _archive_files(sdk_archive)
    for name in COMPARED_FIELDS:
        assert ours.get(name) == sdk.get(name), name


def _archive_files(archive: bytes) -> dict[str, bytes]:
    """File name -> content of a tar.gz; the SDK also stores folder entries, which unpack to nothing more."""
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        return {member.name: tar.extractfile(member).read() for member in tar.getmembers()
                if member.isfile() and "__pycache__" not in member.name}
