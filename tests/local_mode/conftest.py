"""Local AWS for the local-mode tests: moto's S3 on a free port, a local SageMaker per test, and the fixture
entry points in scripts/ uploaded as a sourcedir.tar.gz, as the stack uploads training_code/; for the demo tests,
one LocalPipeline (the synthesized app's resources on the same moto server) and one small LETOR dataset."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from shared_stacks import DEMO_CONTEXT
from ranker.log_format import metric_definitions

from local_mode.job_runtime.artifacts import tar_folder_contents
from local_mode.job_runtime.job_runner import RunnerSettings
from local_mode.aws.local_clients import local_account_id, local_client
from local_mode.aws.moto_endpoint import MotoEndpoint
from local_mode.pipeline import LocalPipeline, wait_for_job
from local_mode.sagemaker_api.sagemaker_endpoint import LocalSageMaker
from local_mode.sagemaker_api.training_job_service import TrainingJobService
from local_mode.sagemaker_api.tuning_job_service import TuningJobService

SCRIPTS = Path(__file__).parent / "scripts"
DATA_BUCKET = "local-mode-test-data"
ARTIFACTS_BUCKET = "local-mode-test-artifacts"
SOURCE_BUNDLE_URI = f"s3://{ARTIFACTS_BUCKET}/code/sourcedir.tar.gz"
TRAIN_URI = f"s3://{DATA_BUCKET}/datasets/toy/v1/train/"
TERMINAL = ("Completed", "Failed", "Stopped")
TRAINING_CODE = Path(__file__).resolve().parents[2] / "training_code"
DEMO_QUERIES = 128  # enough whole queries for 2 ranks x the default 32 per batch
REPORTED_LOG_LINES = 40  # torchrun's failure report is about 35 lines
FAILED_JOBS_DIR = Path(__file__).resolve().parents[2] / "local-runs" / "failed-test-jobs"  # make clean removes it


@pytest.fixture(scope="session")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoEndpoint]:
    with MotoEndpoint() as endpoint:
        endpoint.create_buckets([DATA_BUCKET, ARTIFACTS_BUCKET])
        s3 = local_client("s3", endpoint.url)
        bundle = tar_folder_contents(SCRIPTS, tmp_path_factory.mktemp("bundle") / "sourcedir.tar.gz")
        s3.upload_file(str(bundle), ARTIFACTS_BUCKET, "code/sourcedir.tar.gz")
        for name in ("part-0.txt", "part-1.txt", "nested/part-2.txt"):
            s3.put_object(Bucket=DATA_BUCKET, Key=f"datasets/toy/v1/train/{name}", Body=b"1 qid:1 1:0.5\n")
        yield endpoint


@pytest.fixture
def s3(moto: MotoEndpoint) -> Any:
    return local_client("s3", moto.url)


def job_report(jobs_dir: Path, job_name: str, failure_reason: str | None) -> str:
    """What an assertion on a job's status prints when the job did not end as expected: its FailureReason, where its
    folder is kept (copied out of pytest's temporary folders, which later sessions delete) and the last lines of each
    host's log."""
    job_dir = jobs_dir / job_name
    kept = FAILED_JOBS_DIR / f"{time.strftime('%Y%m%dT%H%M%S')}-{job_name}"
    shutil.copytree(job_dir, kept, dirs_exist_ok=True, ignore=_channels_and_code)
    report = [f"FailureReason: {failure_reason}", f"job folder kept at {kept} (channels and code left out)"]
    for log in sorted(kept.glob("algo-*/training.log")):
        report += [f"--- {log} (last {REPORTED_LOG_LINES} lines)", *log.read_text().splitlines()[-REPORTED_LOG_LINES:]]
    return "\n".join(report)


def _channels_and_code(folder: str, names: list[str]) -> list[str]:
    """A host's input channels (input/data) and unpacked code: copies of what the test uploaded."""
    within = Path(folder).name
    return [name for name in names
            if (within == "input" and name == "data") or (within.startswith("algo-") and name == "code")]


@pytest.fixture
def report_job() -> Callable[[Path, str, str | None], str]:
    """`job_report` for tests: `assert status == "Completed", report_job(jobs_dir, name, reason)`."""
    return job_report


@pytest.fixture
def jobs_dir(tmp_path: Path) -> Path:
    """Where the test's local SageMaker keeps its jobs' host folders."""
    return tmp_path / "jobs"


@pytest.fixture
def local_sagemaker(moto: MotoEndpoint, jobs_dir: Path) -> Iterator[LocalSageMaker]:
    service = TrainingJobService(
        s3_endpoint_url=moto.url, account_id=local_account_id(moto.url),
        settings=RunnerSettings(work_dir=jobs_dir, stop_grace_seconds=5, checkpoint_sync_seconds=0.5))
    with LocalSageMaker(service, registry_url=moto.url) as endpoint:
        yield endpoint


@pytest.fixture
def tuning_events() -> list[dict[str, Any]]:
    """Every DescribeHyperParameterTuningJob answer the tuning service announced as a state change."""
    return []


@pytest.fixture
def tuning_sagemaker(moto: MotoEndpoint, tmp_path: Path, tuning_events: list[dict[str, Any]]) -> Iterator[Any]:
    """A boto3 SageMaker client of a local endpoint that serves tuning jobs in front of training jobs."""
    account = local_account_id(moto.url)
    training = TrainingJobService(s3_endpoint_url=moto.url, account_id=account,
                                  settings=RunnerSettings(work_dir=tmp_path / "jobs", stop_grace_seconds=5))
    service = TuningJobService(training, account_id=account,
                               on_state_change=lambda description, tags: tuning_events.append(description))
    with LocalSageMaker(service) as endpoint:
        yield local_client("sagemaker", endpoint.url)


@pytest.fixture
def sagemaker(local_sagemaker: LocalSageMaker) -> Any:
    """A real boto3 SageMaker client speaking HTTP to the local endpoint."""
    return local_client("sagemaker", local_sagemaker.url)


@pytest.fixture(scope="session")
def training_request(moto: MotoEndpoint) -> Callable[..., dict[str, Any]]:
    """A CreateTrainingJob request shaped as the SageMaker Python SDK v2 sends it for the PyTorch estimator."""
    role_arn = f"arn:aws:iam::{local_account_id(moto.url)}:role/local-training"

    def build(name: str, entry_point: str, *, instance_count: int = 1, distribution: dict[str, str] | None = None,
              hyperparameters: dict[str, str] | None = None, checkpoint_uri: str | None = None) -> dict[str, Any]:
        request: dict[str, Any] = {
            "TrainingJobName": name,
            "AlgorithmSpecification": {"TrainingImage": "local/pytorch-training:2.2.0-cpu-py310",
                                       "TrainingInputMode": "File", "MetricDefinitions": metric_definitions()},
            "RoleArn": role_arn,
            "HyperParameters": {
                "epochs": "3", "loss": json.dumps("listnet"),
                "sagemaker_program": json.dumps(entry_point),
                "sagemaker_submit_directory": json.dumps(SOURCE_BUNDLE_URI),
                "sagemaker_container_log_level": "20", "sagemaker_job_name": json.dumps(name),
                "sagemaker_region": json.dumps("us-east-1"),
                **(distribution or {}), **(hyperparameters or {})},
            "InputDataConfig": [{"ChannelName": "train", "DataSource": {"S3DataSource": {
                "S3DataType": "S3Prefix", "S3Uri": TRAIN_URI, "S3DataDistributionType": "FullyReplicated"}}}],
            "OutputDataConfig": {"S3OutputPath": f"s3://{ARTIFACTS_BUCKET}/models/"},
            "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": instance_count, "VolumeSizeInGB": 30},
            "StoppingCondition": {"MaxRuntimeInSeconds": 600},
        }
        if checkpoint_uri:
            request["CheckpointConfig"] = {"S3Uri": checkpoint_uri}
        return request

    return build


@pytest.fixture
def tuning_request(training_request: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    """A CreateHyperParameterTuningJob request over scripts/score_flags.py: by default Random search of
    `learning-rate` (log-scaled) and `epochs` (integer), 4 trials, 2 at a time, maximising val_ndcg@10."""
    default_ranges = {
        "ContinuousParameterRanges": [{"Name": "learning-rate", "MinValue": "0.0001", "MaxValue": "1",
                                       "ScalingType": "Logarithmic"}],
        "IntegerParameterRanges": [{"Name": "epochs", "MinValue": "1", "MaxValue": "3", "ScalingType": "Linear"}]}

    def build(name: str, *, strategy: str = "Random", max_jobs: int | None = 4, parallel: int = 2,
              ranges: dict[str, Any] | None = None, static: dict[str, str] | None = None, seed: int | None = 7,
              objective: tuple[str, str] = ("Maximize", "val_ndcg@10")) -> dict[str, Any]:
        ranges = default_ranges if ranges is None else ranges
        tuned = {entry["Name"] for entries in ranges.values() for entry in entries}
        training = training_request("definition", "score_flags.py", hyperparameters=static)
        limits: dict[str, int] = {"MaxParallelTrainingJobs": parallel}
        if max_jobs is not None:
            limits["MaxNumberOfTrainingJobs"] = max_jobs
        config: dict[str, Any] = {"Strategy": strategy, "ResourceLimits": limits, "ParameterRanges": ranges,
                                  "HyperParameterTuningJobObjective": {"Type": objective[0],
                                                                       "MetricName": objective[1]},
                                  "TrainingJobEarlyStoppingType": "Off"}
        if seed is not None:
            config["RandomSeed"] = seed
        definition = {field: training[field] for field in ("AlgorithmSpecification", "RoleArn", "InputDataConfig",
                                                            "OutputDataConfig", "ResourceConfig", "StoppingCondition")}
        definition["StaticHyperParameters"] = {key: value for key, value in training["HyperParameters"].items()
                                               if key not in tuned}
        return {"HyperParameterTuningJobName": name, "HyperParameterTuningJobConfig": config,
                "TrainingJobDefinition": definition, "Tags": [{"Key": "dataset", "Value": "toy"}]}

    return build


@pytest.fixture
def wait_for_end(sagemaker: Any) -> Callable[[str], dict[str, Any]]:
    """Poll DescribeTrainingJob as a client would, until the job is Completed, Failed or Stopped."""

    def wait(name: str, timeout: float = 120) -> dict[str, Any]:
        return wait_for_job(sagemaker, name, timeout=timeout)

    return wait


@pytest.fixture(scope="session")
def letor_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small synthetic LETOR folder (rank.train + rank.train.query), written as the demo writes it."""
    folder = tmp_path_factory.mktemp("letor")
    subprocess.run([sys.executable, "-m", "ranker.data.synthetic", "--output", str(folder), "--queries",
                    str(DEMO_QUERIES)], cwd=TRAINING_CODE, check=True, capture_output=True)
    return folder


@pytest.fixture(scope="session")
def demo_pipeline(moto: MotoEndpoint, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPipeline]:
    """The synthesized stacks on the session's moto server, the trigger and local SageMaker; one rank per host.

    Synthesized with DEMO_CONTEXT (local hosts run this Python whatever the container).
    """
    # A stopped job's script writes its SIGTERM checkpoint within the grace period; 30 s leaves room on a busy CPU
    # (the service itself waits up to 120 s).
    with LocalPipeline(jobs_dir=tmp_path_factory.mktemp("demo-jobs"), stop_grace_seconds=30, moto=moto,
                       context=DEMO_CONTEXT) as pipeline:
        yield pipeline


@pytest.fixture(scope="session")
def notification_queue() -> Callable[[LocalPipeline, str], Any]:
    """`with notification_queue(pipeline, queue_name) as read:` a queue subscribed to the pipeline's notification topic;
    `read()` returns the SNS envelopes it received since the last read."""
    return _subscribed_queue


@contextmanager
def _subscribed_queue(pipeline: LocalPipeline, queue_name: str) -> Iterator[Callable[[], list[dict[str, Any]]]]:
    """A queue subscribed to the pipeline's notification topic, as an e-mail address would be; yields a reader of the
    SNS envelopes it received since the last read."""
    sqs = local_client("sqs", pipeline.moto_url)
    queue_url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns = local_client("sns", pipeline.moto_url)
    subscription = sns.subscribe(TopicArn=pipeline.environment["NOTIFICATION_TOPIC_ARN"], Protocol="sqs",
                                 Endpoint=queue_arn)["SubscriptionArn"]

    def read() -> list[dict[str, Any]]:
        messages = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get("Messages",
                                                                                                            [])
        for message in messages:
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
        return [json.loads(message["Body"]) for message in messages]

    try:
        yield read
    finally:
        sns.unsubscribe(SubscriptionArn=subscription)
        sqs.delete_queue(QueueUrl=queue_url)
