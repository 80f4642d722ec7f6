"""What the demo's summary shows of one finished training job (the demo's job, or a tuning job's best trial): its
state as DescribeTrainingJob reports it, and its model.tar.gz and output.tar.gz unpacked where the user can open
them (`<work dir>/outputs/<job>/`)."""

from __future__ import annotations

import io
import os
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from local_mode.aws.mlflow_server import STORE_FILE, LocalMlflowServer
from local_mode.aws.s3_transfer import split_s3_uri


@dataclass(frozen=True)
class MlflowRunSummary:
    """A tracked job's MLflow run, as DescribeTrainingJob names it (MlflowConfig, MlflowDetails)."""

    experiment_name: str
    store: Path
    """The tracking server's SQLite store, which keeps the run once the demo's server stops."""
    experiment_id: str | None
    run_id: str | None
    """None when the job logged no run (a script of one's own that logs none)."""


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
    scoring_input: Path | None = None
    """Rows the model scores with ranker.predict (the project's models only): the test channel, else the train
    channel."""
    mlflow_run: MlflowRunSummary | None = None
    """The job's MLflow run, for a tracked job."""


def summarize(description: dict[str, Any], registration: dict[str, Any] | None, s3: Any, work_dir: Path, *,
              watchdog_reason: str | None = None, scoring_input: Path | None = None,
              tracking: LocalMlflowServer | None = None) -> DemoResult:
    """The summary; the job's model.tar.gz and output.tar.gz (plots) are unpacked under `work_dir/outputs/<job>/`.
    `scoring_input`: for a model of the project's entry points, the rows the `next:` command scores. `tracking`: the
    MLflow tracking server of a tracked pipeline."""
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
                      not_registered_reason=registration.get("reason"), plots=plots, metrics=metrics,
                      scoring_input=scoring_input if model_dir else None,
                      mlflow_run=_mlflow_run(description, tracking))


def _mlflow_run(description: dict[str, Any], tracking: LocalMlflowServer | None) -> MlflowRunSummary | None:
    config, details = description.get("MlflowConfig"), description.get("MlflowDetails", {})
    if tracking is None or not config:
        return None
    return MlflowRunSummary(experiment_name=config.get("MlflowExperimentName", ""),
                            store=tracking.store_dir / STORE_FILE, experiment_id=details.get("MlflowExperimentId"),
                            run_id=details.get("MlflowRunId"))


def shown(path: Path) -> str:
    """Relative to the working directory when under it (as `make demo` runs): a path to paste into the next command.
    Symbolic links are kept: the virtual environment's python is one, and only through it is the environment used."""
    absolute = Path(os.path.abspath(path))
    try:
        return str(absolute.relative_to(Path.cwd()))
    except ValueError:
        return str(absolute)


def _unpack(s3: Any, uri: str, folder: Path) -> Path:
    bucket, key = split_s3_uri(uri)
    with tarfile.open(fileobj=io.BytesIO(s3.get_object(Bucket=bucket, Key=key)["Body"].read())) as tar:
        tar.extractall(folder, filter="data")
    return folder
