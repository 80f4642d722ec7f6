"""MLflow logging for both entry points, on rank 0, when the job's environment names a tracking server.

The pipeline's trigger gives a tracked job MLflow's own variables (`MLFLOW_TRACKING_URI`, a SageMaker managed
MLflow ARN that the sagemaker-mlflow plugin resolves; `MLFLOW_EXPERIMENT_NAME`) and `MODEL_S3_OUTPUT_PATH`, the
job's S3 output path; SageMaker names the job in `TRAINING_JOB_NAME`, which becomes the run's name, as in the job's
`MlflowConfig`. The same variables set by hand point a local run at any MLflow server or store. Without
`MLFLOW_TRACKING_URI` nothing is imported and nothing is logged.

A run is found by its name before one is created (and `MLFLOW_RUN_ID`, MLflow's own variable, names one outright): a
job that SageMaker retries or that resumes after a spot interruption goes on logging to the run it started, which is
RUNNING again. What a run holds: every flag (`model.*`, `data.*`, `train.*`, `paths.*`), the metric lines (each
validation's `val_*` metrics and the training loss at their step), the final metrics, and the model's location
(`model_location`). MLflow allows no `@` in a metric name: `val_ndcg@10` is logged as `val_ndcg_at_10`.

A run is ended here alone (Lightning's logger leaves it open, ranker.lightning.tracking): FINISHED once the entry point
has written its model and every rank is through, and otherwise by `ended_on_exit`, around both entry points' run
(ranker.training.session.entry_point_run): FAILED after an error, KILLED after a stop (SIGTERM, which SageMaker sends
for a StopTrainingJob or before a spot interruption). A process ended outright (SIGKILL, a lost instance, or SIGTERM
before the training loop takes the signal over) cannot end its run: it stays RUNNING until a rerun of the job reopens
it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ranker.config import flag_sections

TRACKING_URI_VARIABLE = "MLFLOW_TRACKING_URI"
EXPERIMENT_VARIABLE = "MLFLOW_EXPERIMENT_NAME"
RUN_ID_VARIABLE = "MLFLOW_RUN_ID"
JOB_NAME_VARIABLE = "TRAINING_JOB_NAME"  # set by SageMaker in every training container
OUTPUT_PATH_VARIABLE = "MODEL_S3_OUTPUT_PATH"
DEFAULT_EXPERIMENT = "Default"  # MLflow's own experiment for runs that name none
MODEL_LOCATION_TAG = "model_location"
# SageMaker uploads the model folder to <S3OutputPath>/<job name>/output/model.tar.gz (DescribeTrainingJob's
# ModelArtifacts.S3ModelArtifacts).
MODEL_ARTIFACT = "output/model.tar.gz"
_BATCH = 100  # LogBatch's most metrics, and parameters, in one call
# MLflow's RunStatus names (mlflow.entities.RunStatus), as set_terminated and update_run take them.
RUNNING, FINISHED, FAILED, KILLED = "RUNNING", "FINISHED", "FAILED", "KILLED"


@dataclass(frozen=True)
class TrackingTarget:
    """Where a run goes: the tracking URI, the experiment, and the run (by id, or by name)."""

    tracking_uri: str
    experiment_name: str
    run_name: str | None
    run_id: str | None
    output_path: str | None

    @classmethod
    def from_environment(cls, env: Mapping[str, str] = os.environ) -> TrackingTarget | None:
        """The target the job's environment names, or None where it names no tracking server."""
        if not env.get(TRACKING_URI_VARIABLE):
            return None
        return cls(tracking_uri=env[TRACKING_URI_VARIABLE],
                   experiment_name=env.get(EXPERIMENT_VARIABLE) or DEFAULT_EXPERIMENT,
                   run_name=env.get(JOB_NAME_VARIABLE) or None, run_id=env.get(RUN_ID_VARIABLE) or None,
                   output_path=env.get(OUTPUT_PATH_VARIABLE) or None)

    def model_location(self, model_dir: os.PathLike | str) -> str:
        """Where the model ends up: SageMaker's model.tar.gz for the job, else the local model folder."""
        if self.output_path and self.run_name:
            return f"{self.output_path.rstrip('/')}/{self.run_name}/{MODEL_ARTIFACT}"
        return os.path.abspath(model_dir)


def metric_name(name: str) -> str:
    """`name` as MLflow accepts it (letters, digits, `_ - . / :` and spaces): `@` written out as `_at_`."""
    return name.replace("@", "_at_")


def tracked_metrics(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The numeric values of a metric line under MLflow's names, its `step` aside (each metric's own step)."""
    return {metric_name(name): float(value) for name, value in metrics.items()
            if name not in ("step",) and isinstance(value, (int, float)) and not isinstance(value, bool)}


def run_parameters(config: Any) -> dict[str, str]:
    """Every flag of a RunConfig as `<concern>.<field>`: `train.learning_rate`, `model.hidden_dims`, ..."""
    parameters = {}
    for concern, section in flag_sections(config).items():
        for name, value in _flattened(dataclasses.asdict(section)):
            parameters[f"{concern}.{name}"] = str(value)
    return parameters


def _flattened(values: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    items = []
    for name, value in values.items():
        if isinstance(value, Mapping):
            items += _flattened(value, f"{prefix}{name}.")
        else:
            items.append((f"{prefix}{name}", value))
    return items


class TrackedRun:
    """The job's run, opened on rank 0: found by id or name, else created in the experiment (created first where
    it does not exist)."""

    def __init__(self, target: TrackingTarget):
        from mlflow.tracking import MlflowClient  # only a tracked run pays for importing MLflow

        self.target = target
        self.client = MlflowClient(target.tracking_uri)
        self.run_id = target.run_id or self._found() or self._created()
        self.ended = False
        """Ended by `finish` or `end`: nothing more to do for it on the way out."""

    def _experiment_id(self) -> str:
        experiment = self.client.get_experiment_by_name(self.target.experiment_name)
        return (experiment.experiment_id if experiment is not None
                else self.client.create_experiment(self.target.experiment_name))

    def _found(self) -> str | None:
        """The job's run from an earlier attempt, RUNNING again (it ended when that attempt stopped or failed)."""
        if not self.target.run_name:
            return None
        found = self.client.search_runs([self._experiment_id()], max_results=1,
                                        filter_string=f"attributes.run_name = '{self.target.run_name}'")
        if not found:
            return None
        if found[0].info.status != RUNNING:
            self.client.update_run(found[0].info.run_id, status=RUNNING)
        return found[0].info.run_id

    def _created(self) -> str:
        return self.client.create_run(self._experiment_id(), run_name=self.target.run_name).info.run_id

    def log_parameters(self, parameters: Mapping[str, str]) -> None:
        from mlflow.entities import Param

        params = [Param(name, value) for name, value in parameters.items()]
        for start in range(0, len(params), _BATCH):
            self.client.log_batch(self.run_id, params=params[start:start + _BATCH])

    def log_metrics(self, metrics: Mapping[str, Any], step: int) -> None:
        from mlflow.entities import Metric

        now = _milliseconds()
        entries = [Metric(name, value, now, step) for name, value in tracked_metrics(metrics).items()
                   if not math.isnan(value)]
        for start in range(0, len(entries), _BATCH):
            self.client.log_batch(self.run_id, metrics=entries[start:start + _BATCH])

    def finish(self, final_metrics: Mapping[str, Any], step: int, model_dir: os.PathLike | str) -> None:
        """The final metrics (`final_<name>`, beside each validation's), the model's location; the run ends."""
        from mlflow.entities import RunTag

        self.log_metrics({f"final_{name}": value for name, value in final_metrics.items()}, step)
        self.client.log_batch(self.run_id, tags=[RunTag(MODEL_LOCATION_TAG, self.target.model_location(model_dir))])
        self.end(FINISHED)

    def end(self, status: str) -> None:
        self.client.set_terminated(self.run_id, status)
        self.ended = True


def _milliseconds() -> int:
    return int(time.time() * 1000)


_process_run: TrackedRun | None = None
"""The run `open_run` opened in this process, for `ended_on_exit` to end where the entry point did not finish it."""


def open_run(is_main: bool, config: Any, env: Mapping[str, str] = os.environ) -> TrackedRun | None:
    """On rank 0 of a tracked job, its run with every flag logged; None elsewhere."""
    global _process_run
    target = TrackingTarget.from_environment(env) if is_main else None
    if target is None:
        return None
    _process_run = run = TrackedRun(target)
    run.log_parameters(run_parameters(config))
    return run


def exit_status(error: BaseException | None) -> str:
    """How a run ends that its entry point left without finishing: KILLED when it was stopped (it returned or exited
    without an error: the loop stopped on SIGTERM; or Ctrl-C), FAILED after any error."""
    if error is None or isinstance(error, KeyboardInterrupt):
        return KILLED
    if isinstance(error, SystemExit):
        return KILLED if error.code in (None, 0) else FAILED  # Lightning's stop on SIGTERM exits with no code
    return FAILED


@contextlib.contextmanager
def ended_on_exit() -> Iterator[None]:
    """Around an entry point's run: the run `open_run` opened in the block and that is still open when the block is
    left ends as `exit_status` says. Ending it cannot hide what happened: an error from the tracking server is
    reported on stderr, and the block's own error, if any, goes on."""
    global _process_run
    error: BaseException | None = None
    try:
        yield
    except BaseException as raised:
        error = raised
        raise
    finally:
        run, _process_run = _process_run, None
        if run is not None and not run.ended:
            try:
                run.end(exit_status(error))
            except Exception as failed:
                print(f"MLflow: could not end run {run.run_id} {exit_status(error)}: {failed}", file=sys.stderr,
                      flush=True)
