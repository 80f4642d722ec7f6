"""The demo flow: a dataset lands in local S3, the trigger starts a job, local SageMaker trains it.

generate (or take) LETOR data -> upload `datasets/<name>/<version>/train/` -> upload the manifest.json marker
-> EventBridge event from the stored marker -> trigger handler with the stack's environment -> local job ->
its state change event -> registrar handler -> summary (job, status, duration, NDCG@10 and its split, the unpacked
model, the registered model package, plots; for a job the stalled-job watchdog stopped, why).

With `tuning` options the job becomes a tuning job's definition: its trials run a few at a time, and the summary is a
table of trials with the best one and its registration (local_mode/tuning_demo.py).
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from local_mode.container_envs import container_env
from local_mode.pipeline import LocalPipeline, wait_for_tuning_job
from local_mode.s3_transfer import split_s3_uri
from local_mode.synthesized_app import PROJECT_ROOT
from local_mode.tuning_demo import (
    TuningOptions,
    TuningResult,
    manifest_section,
    summarize_tuning,
    tuning_job_request,
)
from local_mode.watchdog_schedule import WatchdogTiming
from stacks.training_code_modules import training_code_module

DATASET_NAME = "demo-letor"
CHANNELS = ("train", "validation", "test")
PROGRESS_STEPS = ("Starting", "Downloading", "Training", "Uploading")
profiles = training_code_module("sagemaker_distributed/container_profiles.py")


class TriggerRefused(RuntimeError):
    """The trigger answered without starting a job (rejected input, ignored event)."""


@dataclass(frozen=True)
class DemoOptions:
    """What `python -m local_mode` lets a user choose; the rest comes from the stack's defaults."""

    queries: int = 200
    epochs: int = 10
    """Training epochs for the project's own entry points (their `epochs` hyperparameter)."""
    entry_point: str = "train_lightning.py"
    source_dir: Path | None = None
    """A training script's own folder (`-c source_dir`), with `entry_point` inside it; None: training_code/."""
    hyperparameters: tuple[tuple[str, str], ...] = ()
    """Passed to the script as they are (`--name value`); for the project's entry points on top of `epochs`."""
    metric_definitions: str | None = None
    """The job's MetricDefinitions as JSON (`-c metric_definitions`); None: the stack's default."""
    distribution: str = "torch_distributed"
    instance_count: int = 1
    processes_per_host: int = 1
    data: Path | None = None
    work_dir: Path = PROJECT_ROOT / "local-runs"
    # A container profile to run the job in (its cached environment; the stack synthesized for it); None: this Python.
    framework_version: str | None = None
    watchdog_timing: WatchdogTiming | None = None
    """The stalled-job watchdog's silence and period in seconds; None: the stack's `stall_minutes` and
    `stall_check_minutes`."""
    tuning: TuningOptions | None = None
    """Run a tuning job over this job instead of the job alone."""


@dataclass(frozen=True)
class DemoResult:
    """What the summary shows: the finished job as DescribeTrainingJob reports it, and where its plots landed."""

    job_name: str
    status: str
    duration_seconds: float
    ndcg_at_10: float | None
    ndcg_split: str | None  # which queries ndcg_at_10 was measured on: "test" or "validation"
    failure_reason: str | None
    watchdog_reason: str | None  # why the stalled-job watchdog stopped the job, when it did
    model_artifact: str  # the model.tar.gz URI in the (local) artifacts bucket, gone when the demo exits
    model_dir: Path | None  # model.tar.gz unpacked under work_dir, kept
    model_package_arn: str | None
    not_registered_reason: str | None  # why the registrar refused the model, when it did
    plots: list[Path]
    metrics: dict[str, float]
    """The job's final metrics, as its MetricDefinitions read them from the log."""


def run_demo(options: DemoOptions) -> DemoResult | TuningResult:
    """The whole flow with a fresh local pipeline; raises TriggerRefused when the trigger starts no job."""
    run_dir = options.work_dir / time.strftime("run-%Y%m%d-%H%M%S")
    # The stack synthesized as `cdk synth -c distribution=...` would: its container is that distribution's default
    # unless --framework-version names one, whose environment then runs the job.
    context = {"distribution": options.distribution, **bring_your_own_context(options)}
    container = None
    if options.framework_version:
        container = container_env(profiles.profile_named(options.framework_version))
        context["framework_version"] = options.framework_version
    with ThreadPoolExecutor(max_workers=1) as pool:
        # Data generation and synthesis are one busy core each: on two cores they overlap.
        dataset = pool.submit(_dataset_folder, options, run_dir)
        with LocalPipeline(jobs_dir=run_dir / "jobs", processes_per_host=options.processes_per_host,
                           on_log_line=lambda host, line: tqdm.write(f"[{host}] {line}"), context=context,
                           container=container, watchdog_timing=options.watchdog_timing) as pipeline:
            run = run_tuning_demo_job if options.tuning else run_demo_job
            return run(pipeline, options, dataset.result())


def bring_your_own_context(options: DemoOptions) -> dict[str, str]:
    """What `npx cdk synth -c ...` would add for a script of the user's own: its folder, its entry point, its metric
    definitions."""
    context = {}
    if options.source_dir is not None:
        context.update(source_dir=str(options.source_dir.resolve()), entry_point=options.entry_point)
    if options.metric_definitions is not None:
        context["metric_definitions"] = options.metric_definitions
    return context


def channels_of(data: Path) -> dict[str, Path]:
    """A folder with `train/` (and optionally `validation/`, `test/`) subfolders gives those channels; any other
    folder is the training channel."""
    if (data / "train").is_dir():
        return {channel: data / channel for channel in CHANNELS if (data / channel).is_dir()}
    return {"train": data}


def run_demo_job(pipeline: LocalPipeline, options: DemoOptions, data: Path) -> DemoResult:
    """Upload `data` as a new dataset version, deliver its marker to the trigger, follow the job, summarize it."""
    version = _new_version()
    marker = pipeline.upload_channels(channels_of(data), dataset=DATASET_NAME, version=version,
                                      manifest=demo_manifest(options))
    result = pipeline.deliver(marker)
    if result.get("status") != "started":
        raise TriggerRefused(f"the trigger started no job: {json.dumps(result)[:2000]}")
    description = follow_job(pipeline, result["job_name"])
    stop = pipeline.stopped_by_watchdog(result["job_name"]) if pipeline.watchdog else None
    return summarize(description, pipeline.deliver_job_state(description), pipeline.s3, options.work_dir,
                     watchdog_reason=stop["reason"] if stop else None)


def run_tuning_demo_job(pipeline: LocalPipeline, options: DemoOptions, data: Path) -> TuningResult:
    """Upload `data` as a new dataset version, run a tuning job whose definition is the training job the trigger
    builds for it, follow it, summarize its trials and the registration of its best model."""
    assert options.tuning, "run_tuning_demo_job needs DemoOptions.tuning"
    version = _new_version()
    manifest = demo_manifest(options)
    marker = pipeline.upload_channels(channels_of(data), dataset=DATASET_NAME, version=version, manifest=manifest)
    name = start_tuning_job(pipeline, marker, version=version, options=options)
    description = wait_for_tuning_job(pipeline.sagemaker, name)
    pages = pipeline.sagemaker.get_paginator("list_training_jobs_for_hyper_parameter_tuning_job").paginate(
        HyperParameterTuningJobName=name, SortBy="Name", SortOrder="Ascending")
    trials = [summary for page in pages for summary in page["TrainingJobSummaries"]]
    return summarize_tuning(description, trials, pipeline.tuning_delivery(name))


def start_tuning_job(pipeline: LocalPipeline, marker: str, *, version: str, options: DemoOptions) -> str:
    """Start the tuning job the version's manifest asks for; returns its name.

    A trigger that builds tuning jobs answers the dry run of the version with `job_kind: tuning` and starts the tuning
    job from the marker's event. One that builds training jobs only still builds and checks the trials' training
    request (its guards included), which the demo then wraps in the tuning job itself.
    """
    assert options.tuning, "start_tuning_job needs DemoOptions.tuning"
    planned = pipeline.invoke_trigger({"dataset": DATASET_NAME, "version": version, "dry_run": True})
    if planned.get("status") != "dry_run":
        raise TriggerRefused(f"the trigger refused the tuning job's training job: {json.dumps(planned)[:2000]}")
    if planned.get("job_kind") == "tuning":
        started = pipeline.deliver(marker)
        if started.get("status") != "started":
            raise TriggerRefused(f"the trigger started no tuning job: {json.dumps(started)[:2000]}")
        return started["job_name"]
    name = f"{pipeline.static_settings['job_name_prefix']}-tune-{uuid.uuid4().hex[:6]}"
    pipeline.sagemaker.create_hyper_parameter_tuning_job(**tuning_job_request(planned["request"], name=name,
                                                                              options=options.tuning))
    return name


def _new_version() -> str:
    return f"v{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:4]}"


def _dataset_folder(options: DemoOptions, run_dir: Path) -> Path:
    if options.data:
        return options.data
    folder = run_dir / "data"
    subprocess.run([sys.executable, "-m", "ranker.data.synthetic", "--output", str(folder), "--queries",
                    str(options.queries)], cwd=PROJECT_ROOT / "training_code", check=True)
    return folder


def demo_manifest(options: DemoOptions) -> dict[str, Any]:
    """The dataset's manifest.json: its `training` object overrides the stack's defaults for this version's job.

    The trigger checks the instance type against the distribution as the cloud would, so the demo names the type a
    default job of that distribution gets; locally each host runs `--processes-per-host` CPU ranks whatever the type.
    """
    own_entry_point = options.source_dir is None
    hyperparameters = {**({"epochs": options.epochs} if own_entry_point else {}), **dict(options.hyperparameters)}
    manifest: dict[str, Any] = {"training": {
        "entry_point": options.entry_point, "distribution": options.distribution,
        "instance_type": profiles.DEFAULT_INSTANCE_TYPES[options.distribution],
        "instance_count": options.instance_count, "hyperparameters": hyperparameters}}
    if options.tuning:
        manifest["tuning"] = manifest_section(options.tuning)
    return manifest


def follow_job(pipeline: LocalPipeline, job_name: str) -> dict[str, Any]:
    """Wait for the job with a progress bar over the secondary statuses."""
    # Redrawn in place on a terminal; in a log (CI, a pipe) only the streamed lines and the summary are useful.
    with tqdm(total=len(PROGRESS_STEPS), desc=job_name, unit="step", leave=True,
              disable=not sys.stderr.isatty()) as bar:
        def show(description: dict[str, Any]) -> None:
            status = description["SecondaryStatus"]
            done = PROGRESS_STEPS.index(status) if status in PROGRESS_STEPS else len(PROGRESS_STEPS)
            bar.set_postfix_str(status)
            bar.update(done - bar.n)

        return pipeline.wait(job_name, on_description=show)


def summarize(description: dict[str, Any], registration: dict[str, Any] | None, s3: Any,
              work_dir: Path, watchdog_reason: str | None = None) -> DemoResult:
    """The summary; the job's model.tar.gz and output.tar.gz (plots) are unpacked under `work_dir/outputs/<job>/`."""
    metrics = {metric["MetricName"]: metric["Value"] for metric in description.get("FinalMetricDataList", [])}
    artifact = description["ModelArtifacts"]["S3ModelArtifacts"]
    model_dir, plots = None, []
    if artifact:
        output = work_dir / "outputs" / description["TrainingJobName"]
        model_dir = _unpack(s3, artifact, output / "model")
        plots = sorted(_unpack(s3, artifact.removesuffix("model.tar.gz") + "output.tar.gz", output).glob("*.png"))
    ndcg_split = "test" if "test_ndcg@10" in metrics else "validation" if "val_ndcg@10" in metrics else None
    registration = registration or {}
    end = description.get("TrainingEndTime") or description["LastModifiedTime"]
    return DemoResult(job_name=description["TrainingJobName"], status=description["TrainingJobStatus"],
                      duration_seconds=(end - description["CreationTime"]).total_seconds(),
                      ndcg_at_10=metrics.get("test_ndcg@10", metrics.get("val_ndcg@10")), ndcg_split=ndcg_split,
                      failure_reason=description.get("FailureReason"), watchdog_reason=watchdog_reason,
                      model_artifact=artifact, model_dir=model_dir,
                      model_package_arn=registration.get("model_package_arn"),
                      not_registered_reason=registration.get("reason"), plots=plots, metrics=metrics)


def _unpack(s3: Any, uri: str, folder: Path) -> Path:
    bucket, key = split_s3_uri(uri)
    with tarfile.open(fileobj=io.BytesIO(s3.get_object(Bucket=bucket, Key=key)["Body"].read())) as tar:
        tar.extractall(folder, filter="data")
    return folder
