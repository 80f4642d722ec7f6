"""Our requests equal what the real SageMaker Python SDK v2 (sagemaker==2.257.7) sends for the same settings:
CreateTrainingJob from `PyTorch(...).fit(...)`, CreateHyperParameterTuningJob from
`HyperparameterTuner(PyTorch(...), ...).fit(...)`.

The SDK builds its request offline here: the estimator (and tuner) on a `sagemaker.Session` whose SageMaker client
is a real botocore client behind a Stubber, with the request read off the client's parameter hook. The SDK is a test
dependency only; the trigger never imports it.
"""

from __future__ import annotations

import io
import json
import tarfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import boto3
import jsonschema
import pytest
from botocore.stub import Stubber

from sagemaker_sdk import SDK_CONFIG, sagemaker
from sagemaker.debugger import TensorBoardOutputConfig
from sagemaker.inputs import TrainingInput
from sagemaker.pytorch import PyTorch
from sagemaker.tuner import (
    CategoricalParameter,
    ContinuousParameter,
    HyperbandStrategyConfig,
    HyperparameterTuner,
    IntegerParameter,
    StrategyConfig,
    WarmStartConfig,
    WarmStartTypes,
)
from stacks.source_bundle import pack_members
from stacks.source_layout import bundle_members
from training_trigger.request import build_training_job_request
from training_trigger.tuning import ParameterRange, TuningJob, parse_tuning_section, resolve_tuning
from training_trigger.tuning_request import build_tuning_job_request

from trigger.sample_inputs import job_spec, stack_settings

# Importing the SDK alone takes seconds.
pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning:sagemaker.*"),
              pytest.mark.usefixtures("sdk_config_checked_once")]
REGION = "eu-west-1"
COMPARED_FIELDS = ("HyperParameters", "InputDataConfig", "ResourceConfig", "OutputDataConfig", "StoppingCondition",
                   "CheckpointConfig", "VpcConfig", "RetryStrategy", "TensorBoardOutputConfig", "Environment",
                   "InfraCheckConfig")


def _estimator(settings, spec, session, *, framework_version: str, source_dir: str | None = None,
               dependencies: list[str] | None = None, code_location: str | None = None,
               checkpoint_s3_uri: str | None = None) -> PyTorch:
    """The `PyTorch` estimator a user would write for these settings and this job."""
    distribution = {"none": None, "pytorchddp": {"pytorchddp": {"enabled": True}},
                    "smdistributed": {"smdistributed": {"dataparallel": {"enabled": True}}},
                    "torch_distributed": {"torch_distributed": {"enabled": True}}}[spec.distribution]
    return PyTorch(
        entry_point=spec.entry_point, source_dir=source_dir or settings.source_bundle_uri,
        dependencies=dependencies, code_location=code_location, role=settings.role_arn,
        framework_version=framework_version, py_version=settings.python_version,
        instance_type=spec.instance_type, instance_count=spec.instance_count, distribution=distribution,
        hyperparameters=dict(spec.hyperparameters), output_path=settings.output_s3_uri,
        checkpoint_s3_uri=checkpoint_s3_uri,
        checkpoint_local_path="/opt/ml/checkpoints" if checkpoint_s3_uri else None,
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
        enable_infra_check=spec.infra_check or None,
        sagemaker_session=session, debugger_hook_config=False, disable_profiler=True,
        tensorboard_output_config=TensorBoardOutputConfig(
            s3_output_path=f"{settings.output_s3_uri}{spec.job_name}/tensorboard/",
            container_local_output_path="/opt/ml/output/tensorboard") if spec.tensorboard else None,
    )


def _sdk_session(operation: str, response: dict[str, Any]) -> tuple[Any, Any, list[dict[str, Any]]]:
    """A `sagemaker.Session` on a real client behind a Stubber that answers `operation` once, and the list the
    request it sends is recorded in."""
    boto_session = boto3.Session(region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing")
    client = boto_session.client("sagemaker")
    sent: list[dict[str, Any]] = []
    operation_name = client.meta.method_to_api_mapping[operation]
    client.meta.events.register_first(f"before-parameter-build.sagemaker.{operation_name}",
                                      lambda params, **_: sent.append(dict(params)))
    stubber = Stubber(client)
    stubber.add_response(operation, response)
    session = sagemaker.Session(boto_session=boto_session, sagemaker_client=client, sagemaker_config=SDK_CONFIG)
    return session, stubber, sent


def _sdk_inputs(spec) -> dict[str, TrainingInput]:
    return {name: TrainingInput(uri, distribution=spec.train_data_distribution if name == "train"
                                else "FullyReplicated")
            for name, uri in spec.channels.items()}


def _sdk_request(settings, spec, *, framework_version: str, source_dir: str | None = None,
                 dependencies: list[str] | None = None, code_location: str | None = None) -> dict[str, Any]:
    """What `PyTorch(...).fit(...)` sends to CreateTrainingJob for these settings; a local `source_dir` is packed
    and uploaded by the SDK to `code_location` (an S3 endpoint the caller provides)."""
    session, stubber, sent = _sdk_session("create_training_job", {
        "TrainingJobArn": f"arn:aws:sagemaker:{REGION}:123456789012:training-job/{spec.job_name}"})
    with stubber:
        estimator = _estimator(settings, spec, session, framework_version=framework_version, source_dir=source_dir,
                               dependencies=dependencies, code_location=code_location,
                               checkpoint_s3_uri=f"{settings.checkpoint_s3_uri}{spec.job_name}/")
        estimator.fit(_sdk_inputs(spec), wait=False, logs=False, job_name=spec.job_name)
    [request] = sent
    return request


def _sdk_tuner_kwargs(tuning) -> dict[str, Any]:
    """`HyperparameterTuner(...)`'s arguments for a resolved tuning section."""
    def sdk_range(found):
        if found.type == "categorical":
            return CategoricalParameter(list(found.values))
        kind = ContinuousParameter if found.type == "continuous" else IntegerParameter
        return kind(found.minimum, found.maximum, scaling_type=found.scaling)

    warm_start = WarmStartConfig(WarmStartTypes(tuning.warm_start_type), parents=set(tuning.warm_start_parents)) \
        if tuning.warm_start_parents else None
    return {"objective_metric_name": tuning.objective_metric, "objective_type": tuning.objective_type,
            "hyperparameter_ranges": {found.name: sdk_range(found) for found in tuning.ranges},
            "strategy": tuning.strategy, "max_jobs": tuning.max_jobs, "max_parallel_jobs": tuning.max_parallel_jobs,
            "early_stopping_type": tuning.early_stopping, "random_seed": tuning.random_seed,
            "warm_start_config": warm_start}


def _sdk_tuning_request(settings, spec, *, framework_version: str, checkpoint_s3_uri: str | None = None,
                        **tuner_kwargs: Any) -> dict[str, Any]:
    """What `HyperparameterTuner(PyTorch(...), ...).fit(...)` sends to CreateHyperParameterTuningJob."""
    session, stubber, sent = _sdk_session("create_hyper_parameter_tuning_job", {
        "HyperParameterTuningJobArn": f"arn:aws:sagemaker:{REGION}:123456789012:hyper-parameter-tuning-job/"
                                      f"{spec.job_name}"})
    with stubber:
        estimator = _estimator(settings, spec, session, framework_version=framework_version,
                               checkpoint_s3_uri=checkpoint_s3_uri)
        tuner = HyperparameterTuner(estimator, metric_definitions=[dict(d) for d in settings.metric_definitions],
                                    tags=[{"Key": key, "Value": value} for key, value in spec.tags.items()],
                                    **{**_sdk_tuner_kwargs(spec.tuning), **tuner_kwargs})
        tuner.fit(_sdk_inputs(spec), job_name=spec.job_name, wait=False)
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
    # Given spot, VPC, KMS (on an instance without local NVMe), isolation, encryption, retries, FastFile, TensorBoard
    # and the cluster health check
    settings = stack_settings(use_spot=True, max_wait_seconds=172800, subnet_ids=["subnet-0a1b", "subnet-2c3d"],
                              security_group_ids=["sg-0f1e"], KMS_KEY_ARN="arn:aws:kms:eu-west-1:123456789012:key/1a2b",
                              enable_network_isolation=True, enable_inter_container_encryption=True,
                              job_retry_attempts=3, input_mode="FastFile")
    spec = job_spec(distribution="torch_distributed", instance_type="ml.p3.8xlarge", instance_count=2, spot=True,
                    max_runtime=43200, tensorboard=True, infra_check=True)
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


def test_the_sdk_still_refuses_a_config_its_schema_does_not_allow():
    # The schema is checked once for the module (sdk_config_checked_once); every config is still validated against it
    boto_session = boto3.Session(region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing")
    with pytest.raises(jsonschema.ValidationError, match="TelemetryOptOut"):
        sagemaker.Session(boto_session=boto_session, sagemaker_client=boto_session.client("sagemaker"),
                          sagemaker_config={"SchemaVersion": "1.0",
                                            "SageMaker": {"PythonSDK": {"Modules": {"TelemetryOptOut": "yes"}}}})


def test_warm_pool_matches_the_sdk():
    settings = stack_settings(keep_alive_seconds=1800)
    spec = job_spec()
    sdk = _sdk_request(settings, spec, framework_version="2.2.0")
    assert build_training_job_request(spec, settings)["ResourceConfig"] == sdk["ResourceConfig"]


FOREIGN_CODE = Path(__file__).resolve().parents[2] / "fixtures" / "foreign_training_code"
CODE_BUCKET = "ranker-artifacts-example"


def test_a_foreign_source_dir_with_dependencies_matches_what_the_sdk_packs_and_sends(tmp_path, aws_mock):
    # Given a user's source folder, their script, and a dependency folder, as `PyTorch(source_dir=..., entry_point=...,
    # dependencies=[...])` takes them
    dependency = tmp_path / "sagemaker_distributed"
    dependency.mkdir()
    (dependency / "__init__.py").write_text('"""Process topology and backend choice for any training script."""\n')
    (dependency / "topology.py").write_text("import os\n\nWORLD_SIZE = int(os.environ.get('WORLD_SIZE', '1'))\n")
    spec = job_spec(entry_point="train.py", hyperparameters={"lr": 0.1, "optimizer": "sgd"},
                    distribution="torch_distributed", instance_type="ml.g5.12xlarge")
    # When the SDK packs, uploads (to a local S3) and submits the job
    with aws_mock():
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


RANKER_TUNING = TuningJob(
    objective_metric="val_ndcg@10", objective_type="Maximize", strategy="Bayesian", max_jobs=4, max_parallel_jobs=2,
    early_stopping="Off",
    ranges=(ParameterRange("learning-rate", "continuous", 0.0001, 0.01, "Logarithmic"),
            ParameterRange("epochs", "integer", 2, 8),
            ParameterRange("loss", "categorical", values=("listwise", "pairwise"))))


def _assert_same_tuning_request(ours: dict[str, Any], sdk: dict[str, Any]) -> None:
    """Every field of the request and of its training definition equal, the SDK's one CheckpointConfig aside
    (tuning_request.py says why the trigger sends none)."""
    sdk_definition = {key: value for key, value in sdk["TrainingJobDefinition"].items() if key != "CheckpointConfig"}
    assert ours["TrainingJobDefinition"] == sdk_definition
    assert {key: value for key, value in ours.items() if key != "TrainingJobDefinition"} == \
        {key: value for key, value in sdk.items() if key != "TrainingJobDefinition"}


@pytest.mark.parametrize(
    ("distribution", "framework_version", "python_version", "instance_type", "count"),
    [
        ("none", "2.2.0", "py310", "ml.g5.2xlarge", 1),
        ("pytorchddp", "2.2.0", "py310", "ml.p4d.24xlarge", 2),
        ("smdistributed", "2.2.0", "py310", "ml.p4de.24xlarge", 1),
        ("torch_distributed", "2.8.0", "py312", "ml.g5.12xlarge", 2),
    ],
)
def test_each_distribution_modes_tuning_request_matches_the_sdks_tuner(distribution, framework_version,
                                                                       python_version, instance_type, count):
    # Given a tuning job over a continuous (log), an integer and a categorical range, tuning `epochs`, which the
    # job also sets statically
    image = f"763104351884.dkr.ecr.{REGION}.amazonaws.com/pytorch-training:{framework_version}-gpu-{python_version}"
    settings = stack_settings(framework_version=framework_version, python_version=python_version,
                              TRAINING_IMAGE_URI=image)
    spec = job_spec(job_name="ranker-web-sear-5d0c2e7f1a", distribution=distribution, instance_type=instance_type,
                    instance_count=count, tuning=RANKER_TUNING)
    # When `HyperparameterTuner(PyTorch(...), ...).fit(...)` and the trigger build the request
    sdk = _sdk_tuning_request(settings, spec, framework_version=framework_version)
    ours = build_tuning_job_request(spec, settings)
    # Then they are equal field by field, the tuned `epochs` gone from the static hyperparameters
    _assert_same_tuning_request(ours, sdk)
    assert "epochs" not in ours["TrainingJobDefinition"]["StaticHyperParameters"]


def test_production_options_and_a_warm_start_match_the_sdks_tuner():
    # Given spot, VPC, KMS, isolation, encryption, retries, FastFile, an environment, a seed and a warm start
    settings = stack_settings(use_spot=True, max_wait_seconds=172800, subnet_ids=["subnet-0a1b", "subnet-2c3d"],
                              security_group_ids=["sg-0f1e"], KMS_KEY_ARN="arn:aws:kms:eu-west-1:123456789012:key/1a2b",
                              enable_network_isolation=True, enable_inter_container_encryption=True,
                              job_retry_attempts=3, input_mode="FastFile", keep_alive_seconds=0)
    tuning = TuningJob(**{**RANKER_TUNING.__dict__, "strategy": "Random", "early_stopping": "Auto",
                          "random_seed": 7, "warm_start_parents": ("ranker-web-sear-0a1b2c3d4e",),
                          "warm_start_type": "TransferLearning"})
    spec = job_spec(job_name="ranker-web-sear-5d0c2e7f1a", distribution="torch_distributed",
                    instance_type="ml.p3.8xlarge", instance_count=2, spot=True, max_runtime=43200,
                    environment={"NCCL_DEBUG": "INFO"}, train_data_distribution="ShardedByS3Key", tuning=tuning)
    # When both build the request
    sdk = _sdk_tuning_request(settings, spec, framework_version="2.2.0")
    ours = build_tuning_job_request(spec, settings)
    # Then they are equal field by field
    _assert_same_tuning_request(ours, sdk)


def test_the_sdks_tuner_sends_one_checkpoint_prefix_for_every_trial_which_the_trigger_leaves_out():
    # Given an estimator with a checkpoint location, as a training job has one
    settings, spec = stack_settings(), job_spec(job_name="ranker-web-sear-5d0c2e7f1a", tuning=RANKER_TUNING)
    checkpoints = f"{settings.checkpoint_s3_uri}{spec.job_name}/"
    # When the SDK's tuner and the trigger build the tuning request
    sdk = _sdk_tuning_request(settings, spec, framework_version="2.2.0", checkpoint_s3_uri=checkpoints)
    ours = build_tuning_job_request(spec, settings)
    # Then the SDK sends that one prefix in the definition all trials share (each trial would resume the snapshot
    # another left there), and the trigger sends none, so each trial trains from its own start
    assert sdk["TrainingJobDefinition"]["CheckpointConfig"] == {"S3Uri": checkpoints,
                                                                "LocalPath": "/opt/ml/checkpoints"}
    assert "CheckpointConfig" not in ours["TrainingJobDefinition"]
    _assert_same_tuning_request(ours, sdk)


def test_a_grid_search_matches_the_sdks_tuner():
    # Given a Grid search over two categorical ranges, with as many trials as combinations (the trigger's default
    # for Grid; the SDK's tuner needs max_jobs given: without it, it sends None, which botocore refuses)
    tuning = TuningJob(objective_metric="val_ndcg@10", objective_type="Maximize", strategy="Grid", max_jobs=4,
                       max_parallel_jobs=2, early_stopping="Off",
                       ranges=(ParameterRange("loss", "categorical", values=("listwise", "pairwise")),
                               ParameterRange("batch-size", "categorical", values=(256, 512))))
    settings, spec = stack_settings(), job_spec(job_name="ranker-web-sear-5d0c2e7f1a", tuning=tuning)
    # When both build the request / Then they are equal field by field (values JSON-encoded, numbers too)
    _assert_same_tuning_request(build_tuning_job_request(spec, settings),
                                _sdk_tuning_request(settings, spec, framework_version="2.2.0"))


def test_a_hyperband_search_matches_the_sdks_tuner_with_its_strategy_config():
    # Given a Hyperband section over the learning rate of a job that trains 10 epochs (the sample stack's default)
    settings = stack_settings()
    spec = job_spec(job_name="ranker-web-sear-5d0c2e7f1a", hyperparameters={"epochs": 10, "loss": "listwise"})
    section = parse_tuning_section({"strategy": "Hyperband", "ranges": {"learning-rate": {
        "type": "continuous", "min": 0.0001, "max": 0.01, "scaling": "Logarithmic"}}}, "tuning")
    tuning = resolve_tuning(section, entry_point=spec.entry_point, settings=settings, where="tuning",
                            hyperparameters=spec.hyperparameters)
    spec = replace(spec, tuning=tuning)
    # When the trigger builds the request, and a user writes the SDK's tuner for the same search, giving Hyperband the
    # job's 10 epochs as its most resource and 1 as its least
    ours = build_tuning_job_request(spec, settings)
    sdk = _sdk_tuning_request(settings, spec, framework_version="2.2.0", strategy_config=StrategyConfig(
        hyperband_strategy_config=HyperbandStrategyConfig(max_resource=10, min_resource=1)))
    # Then they are equal field by field, StrategyConfig included
    assert ours["HyperParameterTuningJobConfig"]["StrategyConfig"] == {
        "HyperbandStrategyConfig": {"MinResource": 1, "MaxResource": 10}}
    _assert_same_tuning_request(ours, sdk)
