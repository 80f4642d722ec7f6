"""What a job's processes get from its request in local mode: the job's `Environment` in every process, whatever
launched it, and a `ShardedByS3Key` training channel dealt out across the hosts (each object on exactly one host)
while the other channels reach every host; a script learns which from sagemaker_distributed, as in the cloud. Last,
the same from a dataset's manifest.json through the whole pipeline (trigger included).

The entry point (tests/local_mode/byo/plain_scripts/record_job_view.py) is bundled with sagemaker_distributed beside
it, as the stack bundles any source folder, and records what each process saw in its host's model folder.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from shared_stacks import PLAIN_SCRIPTS

from local_mode.demo import bring_your_own_context
from local_mode.job_runtime.job_runner import RunnerSettings
from local_mode.aws.local_clients import local_account_id, local_client
from local_mode.pipeline import LocalPipeline, wait_for_job
from local_mode.sagemaker_api.sagemaker_endpoint import LocalSageMaker
from local_mode.sagemaker_api.training_job_service import TrainingJobService
from stacks.source_bundle import pack_members
from stacks.source_layout import bundle_members

pytestmark = pytest.mark.slow

TORCH_DISTRIBUTED = {"sagemaker_torch_distributed_enabled": "true", "sagemaker_instance_type": '"ml.m5.xlarge"'}
SMDDP = {"sagemaker_distributed_dataparallel_enabled": "true", "sagemaker_instance_type": '"ml.m5.xlarge"',
         "sagemaker_distributed_dataparallel_custom_mpi_options": '""'}
PROCESSES_PER_HOST = 2
TRAINING_CODE = Path(__file__).resolve().parents[3] / "training_code"
BUCKET = "local-mode-test-job-view"
SHARDED_ROOT = f"s3://{BUCKET}/datasets/sharded/v1/"
TRAIN_OBJECTS = ("part-0.txt", "part-1.txt", "part-2.txt", "nested/part-3.txt")
VALIDATION_OBJECTS = ("held-out-0.txt", "held-out-1.txt")


@pytest.fixture(scope="module")
def bundle_with_package(moto, tmp_path_factory) -> str:
    """record_job_view.py's folder with sagemaker_distributed beside it, packed as the stack packs a source folder."""
    moto.create_buckets([BUCKET])
    members = bundle_members(PLAIN_SCRIPTS.source_dir, (TRAINING_CODE / "sagemaker_distributed",))
    archive = pack_members(members, tmp_path_factory.mktemp("bundle") / "sourcedir.tar.gz")
    s3 = local_client("s3", moto.url)
    s3.upload_file(str(archive), BUCKET, "code/sourcedir.tar.gz")
    for channel, names in (("train", TRAIN_OBJECTS), ("validation", VALIDATION_OBJECTS)):
        for name in names:
            s3.put_object(Bucket=BUCKET, Key=f"datasets/sharded/v1/{channel}/{name}", Body=b"1 qid:1 1:0.5\n")
    return f"s3://{BUCKET}/code/sourcedir.tar.gz"


@pytest.fixture
def jobs_dir(tmp_path) -> Path:
    return tmp_path / "jobs"


@contextmanager
def recording_sagemaker(moto, jobs_dir: Path) -> Iterator[Any]:
    """Local SageMaker starting two processes on each host."""
    service = TrainingJobService(
        s3_endpoint_url=moto.url, account_id=local_account_id(moto.url),
        settings=RunnerSettings(work_dir=jobs_dir, processes_per_host=PROCESSES_PER_HOST, stop_grace_seconds=5))
    with LocalSageMaker(service) as endpoint:
        yield local_client("sagemaker", endpoint.url)


@pytest.fixture
def sagemaker(moto, jobs_dir) -> Iterator[Any]:
    with recording_sagemaker(moto, jobs_dir) as client:
        yield client


def run_recording_job(sagemaker, training_request, wait_for_end, bundle: str, name: str, *,
                      distribution: dict[str, str], **request_members: Any) -> None:
    request = training_request(name, "record_job_view.py", instance_count=2, distribution=distribution,
                               hyperparameters={"sagemaker_submit_directory": json.dumps(bundle)})
    sagemaker.create_training_job(**{**request, **request_members})
    description = wait_for_end(name)
    assert description["TrainingJobStatus"] == "Completed", description.get("FailureReason")


def records(jobs_dir: Path, name: str) -> list[dict[str, Any]]:
    """What each process of job `name` recorded, host by host."""
    return [json.loads(path.read_text()) for path in sorted((jobs_dir / name).glob("algo-*/model/process-*.json"))]


JOB_ENVIRONMENT = {"NCCL_DEBUG": "INFO", "OMP_NUM_THREADS": "3"}
"""NCCL_DEBUG and a thread count of the job's own, which must win over local mode's default."""
SHARDED_CHANNELS = [{"ChannelName": channel, "DataSource": {"S3DataSource": {
    "S3DataType": "S3Prefix", "S3Uri": f"{SHARDED_ROOT}{channel}/", "S3DataDistributionType": distribution}}}
    for channel, distribution in (("train", "ShardedByS3Key"), ("validation", "FullyReplicated"))]
"""Four training objects sharded by key across the hosts, and a replicated validation channel."""


@pytest.fixture(scope="module")
def torchrun_job(moto, training_request, bundle_with_package, tmp_path_factory) -> Path:
    """One two-host torchrun job, two processes a host, with JOB_ENVIRONMENT and SHARDED_CHANNELS; the folder of its
    jobs. The environment test's torchrun case and the sharding test read it: neither setting touches what the
    other test looks at, and each torchrun job costs a launcher and two ranks on every host."""
    jobs_dir = tmp_path_factory.mktemp("torchrun-jobs")
    with recording_sagemaker(moto, jobs_dir) as sagemaker:
        run_recording_job(sagemaker, training_request, lambda name: wait_for_job(sagemaker, name),
                          bundle_with_package, "sharded-channel", distribution=TORCH_DISTRIBUTED,
                          Environment=JOB_ENVIRONMENT, InputDataConfig=SHARDED_CHANNELS)
    return jobs_dir


@pytest.mark.parametrize(("distribution", "processes"), [(TORCH_DISTRIBUTED, 4), (SMDDP, 4), ({}, 2)],
                         ids=["torchrun per host", "mpi-style ranks", "one process per host"])
def test_the_jobs_environment_reaches_every_process(distribution, processes, request, training_request,
                                                    bundle_with_package):
    # Given a two-host job whose request sets NCCL_DEBUG and its own thread count
    # When it runs, two processes a host where the launcher starts them
    if distribution is TORCH_DISTRIBUTED:
        jobs_dir, name = request.getfixturevalue("torchrun_job"), "sharded-channel"
    else:
        name = f"environment-{processes}-{len(distribution)}"
        jobs_dir, sagemaker = request.getfixturevalue("jobs_dir"), request.getfixturevalue("sagemaker")
        run_recording_job(sagemaker, training_request, request.getfixturevalue("wait_for_end"), bundle_with_package,
                          name, distribution=distribution, Environment=JOB_ENVIRONMENT)
    # Then every process of every host saw both, the job's thread count over local mode's own default
    seen = records(jobs_dir, name)
    assert len(seen) == processes
    assert {record["host"] for record in seen} == {"algo-1", "algo-2"}
    assert all(record["environment"][name] == value for record in seen for name, value in JOB_ENVIRONMENT.items())


def test_a_sharded_train_channel_gives_each_host_its_own_half_and_tells_the_script(torchrun_job):
    # Given four training objects sharded by key across two hosts, and a replicated validation channel
    # When the job runs (torchrun_job)
    # Then each host holds half of the training objects, none on both, all on one; both hold all of validation
    by_host = {record["host"]: record for record in records(torchrun_job, "sharded-channel")}
    shares = [set(by_host[host]["train_files"]) for host in ("algo-1", "algo-2")]
    assert [len(share) for share in shares] == [2, 2]
    assert shares[0].isdisjoint(shares[1]) and shares[0] | shares[1] == set(TRAIN_OBJECTS)
    for host in ("algo-1", "algo-2"):
        held = sorted(path.name for path in (torchrun_job / "sharded-channel" / host / "input/data/validation").iterdir())
        assert held == sorted(VALIDATION_OBJECTS)
    # And the script, on either host, learned from sagemaker_distributed which channel is sharded
    assert {json.dumps(record["distributions"]) for record in by_host.values()} == {
        json.dumps({"train": "ShardedByS3Key", "validation": "FullyReplicated"})}


@pytest.fixture(scope="module")
def recording_pipeline(moto, tmp_path_factory) -> Iterator[LocalPipeline]:
    """The stacks synthesized for record_job_view.py's folder as a source folder of its own (`-c source_dir=...`,
    sagemaker_distributed bundled beside it), two processes on each host: the stack of test_bring_your_own's plain
    scripts and test_watchdog's (one synthesis for the three), whose manifests name the script they run."""
    context = {"framework_version": "2.2.0", **bring_your_own_context(PLAIN_SCRIPTS)}
    with LocalPipeline(jobs_dir=tmp_path_factory.mktemp("recording-jobs"), processes_per_host=PROCESSES_PER_HOST,
                       stop_grace_seconds=5, moto=moto, context=context) as pipeline:
        yield pipeline


def test_a_manifests_environment_and_sharding_reach_every_process_through_the_pipeline(recording_pipeline,
                                                                                       tmp_path):
    # Given a dataset version of four training files whose manifest asks for NCCL_DEBUG and a sharded train channel
    for index in range(4):
        (tmp_path / "train").mkdir(exist_ok=True)
        (tmp_path / "train" / f"part-{index}.txt").write_text("1 qid:1 1:0.5\n")
    manifest = {"training": {"entry_point": "record_job_view.py", "distribution": "torch_distributed",
                             "instance_type": "ml.g5.12xlarge", "instance_count": 2,
                             "train_data_distribution": "ShardedByS3Key",
                             "environment": {"NCCL_DEBUG": "INFO"}}}
    marker = recording_pipeline.upload_channels({"train": tmp_path / "train"}, dataset="recorded", version="v1",
                                                manifest=manifest)
    # When its marker's event reaches the trigger and the job runs
    result = recording_pipeline.deliver(marker)
    assert result["status"] == "started", result
    description = recording_pipeline.wait(result["job_name"])
    assert description["TrainingJobStatus"] == "Completed", description.get("FailureReason")
    # Then all four processes saw NCCL_DEBUG, and each host's script learned that it holds two of the four files
    seen = records(recording_pipeline.jobs_dir, result["job_name"])
    assert len(seen) == 2 * PROCESSES_PER_HOST
    assert {record["environment"]["NCCL_DEBUG"] for record in seen} == {"INFO"}
    assert {record["distributions"]["train"] for record in seen} == {"ShardedByS3Key"}
    assert sorted(len(record["train_files"]) for record in seen) == [2] * len(seen)
