"""The demo flow: a dataset lands in local S3, the trigger starts a job, local SageMaker trains it.

generate (or take) LETOR data -> upload `datasets/<name>/<version>/train/` -> upload the manifest.json marker
-> EventBridge event from the stored marker -> trigger handler with the stack's environment -> local job ->
summary (job, status, duration, NDCG@10, artifact URI, plot).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from local_mode.bucket_events import object_created_event
from local_mode.job_runner import RunnerSettings
from local_mode.local_clients import local_account_id, local_client
from local_mode.moto_endpoint import MotoEndpoint
from local_mode.s3_transfer import split_s3_uri
from local_mode.sagemaker_endpoint import LocalSageMaker
from local_mode.stack_resources import LocalStackResources
from local_mode.synthesized_app import PROJECT_ROOT, synthesize
from local_mode.training_job_service import TrainingJobService
from local_mode.trigger_invocation import invoke_trigger

DATASET_NAME = "demo-letor"
MARKER = "manifest.json"
PROGRESS_STEPS = ("Starting", "Downloading", "Training", "Uploading")


@dataclass(frozen=True)
class DemoOptions:
    queries: int = 200
    epochs: int = 3
    entry_point: str = "train_lightning.py"
    distribution: str = "torch_distributed"
    instance_count: int = 1
    processes_per_host: int = 1
    data: Path | None = None
    work_dir: Path = PROJECT_ROOT / "local-runs"


@dataclass(frozen=True)
class DemoResult:
    job_name: str
    status: str
    duration_seconds: float
    ndcg_at_10: float | None
    failure_reason: str | None
    model_artifact: str
    plots: list[Path]


def run_demo(options: DemoOptions) -> DemoResult:
    run_dir = options.work_dir / time.strftime("run-%Y%m%d-%H%M%S")
    assembly = synthesize(options.work_dir / "synth")
    with MotoEndpoint() as moto:
        resources = LocalStackResources(assembly, moto.url)
        environment = resources.function_environment("JOB_NAME_PREFIX")
        resources.publish_file_assets()
        account = local_account_id(moto.url)
        service = TrainingJobService(s3_endpoint_url=moto.url, account_id=account,
                                     settings=RunnerSettings(work_dir=run_dir / "jobs",
                                                             processes_per_host=options.processes_per_host),
                                     on_log_line=lambda host, line: tqdm.write(f"[{host}] {line}"))
        with LocalSageMaker(service) as sagemaker_endpoint:
            s3 = local_client("s3", moto.url)
            data_bucket = environment["DATA_BUCKET"]
            marker_key = upload_dataset(s3, data_bucket, environment["DATASET_PREFIX"], options,
                                        _dataset_folder(options, run_dir))
            event = object_created_event(s3, bucket=data_bucket, key=marker_key, account=account)
            result = invoke_trigger(event, account=account, function_environment=environment, s3_url=moto.url,
                                    sns_url=moto.url, sagemaker_url=sagemaker_endpoint.url)
            job_name = result.get("job_name")
            if not job_name:
                raise RuntimeError(f"the trigger started no job: {json.dumps(result)[:2000]}")
            sagemaker = local_client("sagemaker", sagemaker_endpoint.url)
            description = follow_job(sagemaker, job_name)
            return summarize(description, s3, run_dir)


def _dataset_folder(options: DemoOptions, run_dir: Path) -> Path:
    if options.data:
        return options.data
    folder = run_dir / "data"
    subprocess.run([sys.executable, "-m", "ranker.synthetic", "--output", str(folder), "--queries",
                    str(options.queries)], cwd=PROJECT_ROOT / "training_code", check=True)
    return folder


def upload_dataset(s3: Any, bucket: str, prefix: str, options: DemoOptions, folder: Path) -> str:
    """Upload the files as the `train` channel of a new version, then the marker; returns the marker's key."""
    version_root = f"{prefix}{DATASET_NAME}/{time.strftime('v%Y%m%d-%H%M%S')}/"
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            s3.upload_file(str(path), bucket, f"{version_root}train/{path.relative_to(folder).as_posix()}")
    manifest = {"training": {"entry_point": options.entry_point, "distribution": options.distribution,
                             "instance_count": options.instance_count,
                             "hyperparameters": {"epochs": options.epochs}}}
    s3.put_object(Bucket=bucket, Key=version_root + MARKER, Body=json.dumps(manifest).encode())
    return version_root + MARKER


def follow_job(sagemaker: Any, job_name: str) -> dict[str, Any]:
    """Poll DescribeTrainingJob with a progress bar over the secondary statuses, until the job ends."""
    with tqdm(total=len(PROGRESS_STEPS), desc=job_name, unit="step", leave=True) as bar:
        while True:
            description = sagemaker.describe_training_job(TrainingJobName=job_name)
            status = description["SecondaryStatus"]
            done = PROGRESS_STEPS.index(status) if status in PROGRESS_STEPS else len(PROGRESS_STEPS)
            bar.set_postfix_str(status)
            bar.update(done - bar.n)
            if description["TrainingJobStatus"] in ("Completed", "Failed", "Stopped"):
                return description
            time.sleep(0.5)


def summarize(description: dict[str, Any], s3: Any, run_dir: Path) -> DemoResult:
    metrics = {metric["MetricName"]: metric["Value"] for metric in description.get("FinalMetricDataList", [])}
    artifact = description["ModelArtifacts"]["S3ModelArtifacts"]
    plots: list[Path] = []
    if artifact:
        bucket, key = split_s3_uri(artifact.replace("model.tar.gz", "output.tar.gz"))
        archive = run_dir / "output.tar.gz"
        s3.download_file(bucket, key, str(archive))
        with tarfile.open(archive) as tar:
            tar.extractall(run_dir / "output", filter="data")
        plots = sorted((run_dir / "output").rglob("*.png"))
    end = description.get("TrainingEndTime") or description["LastModifiedTime"]
    return DemoResult(job_name=description["TrainingJobName"], status=description["TrainingJobStatus"],
                      duration_seconds=(end - description["CreationTime"]).total_seconds(),
                      ndcg_at_10=metrics.get("test_ndcg@10", metrics.get("val_ndcg@10")),
                      failure_reason=description.get("FailureReason"), model_artifact=artifact, plots=plots)
