"""The demo flow: a dataset lands in local S3, the trigger starts a job, local SageMaker trains it.

generate (or take) LETOR data -> upload `datasets/<name>/<version>/train/` -> upload the manifest.json marker
-> EventBridge event from the stored marker -> trigger handler with the stack's environment -> local job ->
its state change event -> registrar handler -> summary (job, status, duration, NDCG@10 and its split, the unpacked
model, the registered model package, plots; for a job the stalled-job watchdog stopped, why).

With `track`, MLflow's tracking server runs beside it, with its store in `<work dir>/mlflow/` (kept across runs), and
the stack is synthesized to track experiments in it: the job logs to a run named after it, which the summary names.

With a `tuning` section in the manifest the trigger starts a tuning job instead, whose trials are that job: they run a
few at a time, and the summary is a table of trials with the best one, unpacked, and its registration
(local_mode/tuning_demo.py).

Each run works in a folder of its own, `<work dir>/run-<time>-<random>/`: removed when no job started (the trigger
refused, synthesis failed), kept otherwise, with the newest KEPT_RUNS runs' folders and outputs.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from local_mode.aws.mlflow_server import STORE_FILE, LocalMlflowServer
from local_mode.container.container_entrypoint import require_namespaces
from local_mode.container.container_envs import container_env, tracking_layer
from local_mode.job_summary import DemoResult, shown, summarize
from local_mode.pipeline import LocalPipeline, wait_for_tuning_job
from local_mode.aws.synthesized_app import PROJECT_ROOT
from local_mode.sagemaker_api.training_job_service import JobLogSink
from local_mode.tuning_demo import TuningResult, summarize_tuning
from local_mode.sagemaker_api.tuning_job_service import trial_number
from local_mode.aws.watchdog_schedule import WatchdogTiming
from stacks.training_code_modules import training_code_module

DATASET_NAME = "demo-letor"
"""The demo's dataset for the project's entry points; a script of the user's own is named after its folder and file."""
CHANNELS = ("train", "validation", "test")
TRACKING_STORE = "mlflow"
"""The tracking server's folder in the work dir: its SQLite store and artifacts, kept across runs (make clean removes
them with local-runs/)."""
KEPT_RUNS = 5
"""Runs whose folders (`run-*/`: the uploaded data and each host's folder, ~50 MB for the default job) and outputs
(`outputs/<job>/`) the demo keeps; a finished run removes older ones."""
NO_DATA_FILE = "no-data.txt"
NO_DATA_NOTE = ("The demo generates ranking data only for the project's entry points. Your script's train channel "
                "holds this file alone: run the demo with --data DIR to give it the folder it reads.\n")
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
    launch: str | None = None
    """What starts the entry point in the container, the manifest's `launch` (`toolkit`, or `model_trainer`: SDK v3
    ModelTrainer's drivers); None: the stack's default (its `launch` key)."""
    instance_count: int = 1
    processes_per_host: int = 1
    data: Path | None = None
    work_dir: Path = PROJECT_ROOT / "local-runs"
    # A container profile to run the job in (its cached environment; the stack synthesized for it); None: this Python.
    framework_version: str | None = None
    watchdog_timing: WatchdogTiming | None = None
    """The stalled-job watchdog's silence and period in seconds; None: the stack's `stall_minutes` and
    `stall_check_minutes`."""
    tuning: dict[str, Any] | None = None
    """The manifest's `tuning` section (docs/tuning.md): the trigger starts a tuning job over this job instead."""
    track: bool = False
    """Run MLflow's tracking server and a stack that tracks experiments in it (docs/experiment-tracking.md)."""


def run_demo(options: DemoOptions) -> DemoResult | TuningResult:
    """The whole flow with a fresh local pipeline; raises TriggerRefused when the trigger starts no job. A run that
    started no job leaves nothing behind; one that did prunes the work dir to the newest KEPT_RUNS runs."""
    options.work_dir.mkdir(parents=True, exist_ok=True)
    run_dir = Path(tempfile.mkdtemp(prefix=time.strftime("run-%Y%m%d-%H%M%S-"), dir=options.work_dir))
    try:
        result = _run_in(run_dir, options)
    except BaseException:
        if not any((run_dir / "jobs").glob("*")):
            shutil.rmtree(run_dir, ignore_errors=True)
        raise
    prune_runs(options.work_dir, KEPT_RUNS)
    return result


def _run_in(run_dir: Path, options: DemoOptions) -> DemoResult | TuningResult:
    # The stack synthesized as `cdk synth -c distribution=...` would: its container is that distribution's default
    # unless --framework-version names one, whose environment then runs the job.
    context = {"distribution": options.distribution, **bring_your_own_context(options)}
    if options.launch == profiles.MODEL_TRAINER_LAUNCH:
        require_namespaces()  # before the minute of synthesis, which a job that cannot start would waste
    container = None
    if options.framework_version:
        container = container_env(profiles.profile_named(options.framework_version))
        context["framework_version"] = options.framework_version
        if options.track:  # the container's packages plus MLflow's client, as a tracked job installs them
            container = tracking_layer(container)
    # The tracking server starts first: its start is the slowest of the demo's after synthesis, and the job waits for
    # it only when it starts training.
    with (LocalMlflowServer(options.work_dir / TRACKING_STORE) if options.track else nullcontext()) as tracking, \
            ThreadPoolExecutor(max_workers=1) as pool:
        if tracking:
            tqdm.write(f"mlflow:    tracking server at {tracking.url} while the demo runs; runs kept in "
                       f"{shown(tracking.store_dir / STORE_FILE)}")
        # Data generation and synthesis are one busy core each: on two cores they overlap.
        dataset = pool.submit(_dataset_folder, options, run_dir)
        with LocalPipeline(jobs_dir=run_dir / "jobs", processes_per_host=options.processes_per_host,
                           on_log_line=log_printer(trials=options.tuning is not None), context=context,
                           container=container, watchdog_timing=options.watchdog_timing,
                           tracking=tracking) as pipeline:
            run = run_tuning_demo_job if options.tuning else run_demo_job
            return run(pipeline, options, dataset.result())


def log_printer(*, trials: bool) -> JobLogSink:
    """Each job's log lines as the demo prints them: `[algo-N] line`, and for a tuning job's trials, which run side by
    side, `[trial NNN algo-N] line` (NNN: the trial's number in the summary's table)."""
    def show(job_name: str, host: str, line: str) -> None:
        number = trial_number(job_name) if trials else None
        tqdm.write(f"[trial {number} {host}] {line}" if number else f"[{host}] {line}")

    return show


def prune_runs(work_dir: Path, keep: int) -> None:
    """Remove all but the newest `keep` run folders (their names start with their time), with their jobs' outputs."""
    runs = sorted(path for path in work_dir.glob("run-*") if path.is_dir())
    for run in runs[:-keep]:
        for job in (run / "jobs").glob("*"):
            shutil.rmtree(work_dir / "outputs" / job.name, ignore_errors=True)
        shutil.rmtree(run, ignore_errors=True)


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
    result = start_demo_job(pipeline, options, data)
    description = follow_job(pipeline, result["job_name"])
    stop = pipeline.stopped_by_watchdog(result["job_name"]) if pipeline.watchdog else None
    return summarize(description, pipeline.deliver_job_state(description), pipeline.s3, options.work_dir,
                     watchdog_reason=stop["reason"] if stop else None, scoring_input=scoring_input(options, data),
                     tracking=pipeline.tracking)


def run_tuning_demo_job(pipeline: LocalPipeline, options: DemoOptions, data: Path) -> TuningResult:
    """Upload `data` as a new dataset version whose manifest has the `tuning` section, deliver its marker to the
    trigger, follow the tuning job it starts, summarize its trials and the registration of its best model."""
    result = start_demo_job(pipeline, options, data)
    if result.get("job_kind") != "tuning":
        raise TriggerRefused(f"the trigger started a training job, not a tuning job: {json.dumps(result)[:2000]}")
    return follow_tuning_job(pipeline, result["job_name"], options.work_dir, scoring_input(options, data))


def start_demo_job(pipeline: LocalPipeline, options: DemoOptions, data: Path) -> dict[str, Any]:
    """The trigger's result for the marker of a new dataset version of `data`; TriggerRefused unless it started a job."""
    result = pipeline.deliver(upload_demo_version(pipeline, options, data))
    if result.get("status") != "started":
        raise TriggerRefused(f"the trigger started no job: {json.dumps(result)[:2000]}")
    return result


def upload_demo_version(pipeline: LocalPipeline, options: DemoOptions, data: Path) -> str:
    """Upload `data` as a new version of the demo's dataset with the options' manifest; returns the marker's key."""
    return pipeline.upload_channels(channels_of(data), dataset=demo_dataset_name(options), version=_new_version(),
                                    manifest=demo_manifest(options))


def demo_dataset_name(options: DemoOptions) -> str:
    """The dataset the demo uploads: DATASET_NAME for the project's entry points, `<folder>-<script>` for a script of
    the user's own, so that its jobs and model package group carry its name."""
    if options.source_dir is None:
        return DATASET_NAME
    script = Path(options.entry_point).stem
    return re.sub(r"[^A-Za-z0-9]+", "-", f"{options.source_dir.resolve().name}-{script}").strip("-")


def scoring_input(options: DemoOptions, data: Path) -> Path | None:
    """What the `next:` command scores with a model of the project's entry points: the data's test channel, else its
    train channel; None for a script of the user's own (ranker.predict scores the project's models only)."""
    if options.source_dir is not None:
        return None
    channels = channels_of(data)
    return channels.get("test", channels["train"])


def follow_tuning_job(pipeline: LocalPipeline, name: str, work_dir: Path,
                      scored: Path | None = None) -> TuningResult:
    """Wait for the tuning job, then summarize its trials, its best trial (unpacked under `work_dir/outputs/`, as a
    single job is; `scored`: what the `next:` command scores with it) and the registrar's answer to its final
    state."""
    description = wait_for_tuning_job(pipeline.sagemaker, name)
    pages = pipeline.sagemaker.get_paginator("list_training_jobs_for_hyper_parameter_tuning_job").paginate(
        HyperParameterTuningJobName=name, SortBy="Name", SortOrder="Ascending")
    trials = [summary for page in pages for summary in page["TrainingJobSummaries"]]
    best = description.get("BestTrainingJob")
    best_trial = None
    if best:
        best_description = pipeline.sagemaker.describe_training_job(TrainingJobName=best["TrainingJobName"])
        best_trial = summarize(best_description, None, pipeline.s3, work_dir, scoring_input=scored)
    return summarize_tuning(description, trials, pipeline.tuning_delivery(name), best_trial)


def _new_version() -> str:
    return f"v{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:4]}"


def _dataset_folder(options: DemoOptions, run_dir: Path) -> Path:
    """`--data`; else for a script of the user's own a train channel of NO_DATA_FILE alone (the trigger starts no job
    without a train channel); else generated LETOR data."""
    if options.data:
        return options.data
    folder = run_dir / "data"
    if options.source_dir is not None:
        folder.mkdir()
        (folder / NO_DATA_FILE).write_text(NO_DATA_NOTE)
        return folder
    subprocess.run([sys.executable, "-m", "ranker.data.synthetic", "--output", str(folder), "--queries",
                    str(options.queries)], cwd=PROJECT_ROOT / "training_code", check=True)
    return folder


def demo_manifest(options: DemoOptions) -> dict[str, Any]:
    """The dataset's manifest.json: its `training` object overrides the stack's defaults for this version's job.

    The trigger checks the instance type against the distribution as the cloud would, so the demo names the type a
    default job of that distribution gets; locally each host runs `--processes-per-host` CPU ranks whatever the type
    (under the toolkit launch; ModelTrainer's drivers start one process per GPU, here none: one per host).
    """
    own_entry_point = options.source_dir is None
    hyperparameters = {**({"epochs": options.epochs} if own_entry_point else {}), **dict(options.hyperparameters)}
    manifest: dict[str, Any] = {"training": {
        "entry_point": options.entry_point, "distribution": options.distribution,
        "instance_type": profiles.DEFAULT_INSTANCE_TYPES[options.distribution],
        "instance_count": options.instance_count, "hyperparameters": hyperparameters}}
    if options.launch is not None:
        manifest["training"]["launch"] = options.launch
    if options.tuning:
        manifest["tuning"] = options.tuning
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
