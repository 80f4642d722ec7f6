"""Both entry points log a tracked job to its MLflow run: every flag, each metric line (the validation NDCG@10 of
every validation among them), the final metrics and the model's location, read back here through MLflow's client.

The runs are the session's two-rank runs (conftest.two_rank_runs), which the trigger's variables point at a SQLite
store; what they printed is the oracle: every metric line rank 0 printed is in the run, at its step.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import subprocess
import sys
from unittest import mock

import pytest
from lightning.pytorch.utilities.exceptions import SIGTERMException
from mlflow.tracking import MlflowClient
from ranker.config import parse_config
from ranker.lightning.tracking import mlflow_logger
from ranker.training import tracking
from ranker.training.session import entry_point_run
from ranker.training.tracking import TrackedRun, TrackingTarget, metric_name, run_parameters
from test_lightning_logs import metric_lines
from training_launch import (
    ENTRY_POINTS,
    TINY_MODEL_FLAGS,
    TRACKED_EXPERIMENT,
    TRACKED_OUTPUT_PATH,
    TRAINING_CODE,
    free_port,
    script_env,
    tracked_job_name,
)

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _environment_kept():
    """Lightning's MLFlowLogger calls mlflow.set_tracking_uri, which also sets MLFLOW_TRACKING_URI in os.environ for
    child processes: a test's store left there would track every later subprocess of this worker (and turn SDK v2's
    fit(wait=False) into a wait)."""
    with mock.patch.dict(os.environ):
        yield


def _client(two_rank_runs) -> MlflowClient:
    dirs, _ = two_rank_runs[ENTRY_POINTS[0]]
    return MlflowClient(f"sqlite:///{dirs.model_dir.parents[1] / 'mlflow.db'}")


def _run(client: MlflowClient, script: str):
    experiment = client.get_experiment_by_name(TRACKED_EXPERIMENT)
    runs = client.search_runs([experiment.experiment_id],
                              filter_string=f"attributes.run_name = '{tracked_job_name(script)}'")
    assert len(runs) == 1, f"{script}: one run per job, found {len(runs)}"
    return runs[0]


@pytest.mark.parametrize("script", ENTRY_POINTS)
def test_every_validation_line_is_in_the_run_at_its_step(script, two_rank_runs):
    # Given a tracked two-rank run of the entry point / When its run is read back
    client = _client(two_rank_runs)
    run = _run(client, script)
    _, result = two_rank_runs[script]
    printed = [line for line in metric_lines(result.stdout) if "val_ndcg@10" in line]
    history = client.get_metric_history(run.info.run_id, "val_ndcg_at_10")
    # Then each validation line rank 0 printed during training (the last line is the final one) is there, in order,
    # at increasing steps (Lightning's logger also gets its last and final validations, which print as the final line)
    during = [line["val_ndcg@10"] for line in printed[:-1]]
    assert len(during) >= 2
    assert [entry.value for entry in history[:len(during)]] == pytest.approx(during, abs=5e-4)
    steps = [entry.step for entry in history]
    assert steps == sorted(set(steps))


@pytest.mark.parametrize("script", ENTRY_POINTS)
def test_the_final_metrics_and_the_model_location_end_the_run(script, two_rank_runs):
    client = _client(two_rank_runs)
    run = _run(client, script)
    dirs, _ = two_rank_runs[script]
    saved = json.loads((dirs.model_dir / "metrics.json").read_text())
    # The final metrics are metrics.json's, under MLflow's names
    for name in ("val_ndcg@10", "val_loss", "train_loss"):
        if not math.isnan(saved[name]):
            assert run.data.metrics[f"final_{metric_name(name)}"] == pytest.approx(saved[name], rel=1e-6), name
    # The model's location is where SageMaker uploads the job's model folder
    assert run.data.tags["model_location"] == f"{TRACKED_OUTPUT_PATH}{tracked_job_name(script)}/output/model.tar.gz"
    assert run.info.status == "FINISHED"


@pytest.mark.parametrize("script", ENTRY_POINTS)
def test_every_flag_is_a_parameter_of_the_run(script, two_rank_runs):
    run = _run(_client(two_rank_runs), script)
    assert run.data.params["train.batch_size"] == "4"
    assert run.data.params["train.loss"] == "pointwise"
    assert run.data.params["model.dropout"] == "0.0"
    assert run.data.params["train.epochs"] == "3"


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    """One SQLite store for this file's own runs (creating its schema takes seconds); each test names its own job."""
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"


def _tracked_environment(store: str, job: str) -> dict[str, str]:
    return {"MLFLOW_TRACKING_URI": store, "MLFLOW_EXPERIMENT_NAME": TRACKED_EXPERIMENT, "TRAINING_JOB_NAME": job}


def _status(store: str, run_id: str) -> str:
    return MlflowClient(store).get_run(run_id).info.status


def test_a_rerun_of_a_stopped_job_logs_to_the_run_it_started_running_again(store):
    # Given a job whose run ended KILLED (SageMaker stopped it before a spot interruption, or retries it)
    target = TrackingTarget.from_environment(_tracked_environment(store, "ranker-web-search-1"))
    first = TrackedRun(target)
    first.end("KILLED")
    # When the rerun opens its run / Then it is the same one, RUNNING again, and a job of another name gets its own
    assert TrackedRun(target).run_id == first.run_id
    assert _status(store, first.run_id) == "RUNNING"
    other = TrackingTarget.from_environment(_tracked_environment(store, "ranker-web-search-2"))
    assert TrackedRun(other).run_id != first.run_id


def test_without_a_tracking_uri_nothing_is_tracked():
    assert TrackingTarget.from_environment({"MLFLOW_EXPERIMENT_NAME": "x", "TRAINING_JOB_NAME": "j"}) is None


def test_a_local_run_names_its_model_folder(tmp_path):
    target = TrackingTarget.from_environment({"MLFLOW_TRACKING_URI": "http://127.0.0.1:5000"})
    assert (target.experiment_name, target.run_name) == ("Default", None)
    assert target.model_location(tmp_path / "model") == str(tmp_path / "model")


def test_parameters_name_each_flag_by_its_concern():
    parameters = run_parameters(parse_config(["--train", ".", "--learning-rate", "0.003"], env={}))
    assert parameters["train.learning_rate"] == "0.003"
    assert {name.split(".")[0] for name in parameters} == {"model", "data", "train", "paths"}


@pytest.mark.parametrize(("leaving", "status"), [
    (ValueError("rank.train:5: NaN or infinite value"), "FAILED"),  # an error in the run
    (SystemExit(1), "FAILED"),  # an exit with a status (Lightning's after Ctrl-C)
    (SIGTERMException(), "KILLED"),  # Lightning's stop on SIGTERM (the checkpoint is written, the job resumes later)
    (KeyboardInterrupt(), "KILLED"),
    (None, "KILLED"),  # the native loop's stop on SIGTERM: it returns without finishing the run
], ids=["error", "exit-1", "lightning-sigterm", "ctrl-c", "native-sigterm"])
def test_a_run_its_entry_point_leaves_unfinished_ends_failed_or_killed(store, tmp_path, request, leaving, status):
    # Given a tracked job's run opened inside the entry points' run
    config = parse_config(["--train", str(tmp_path)], env={})
    with pytest.raises(type(leaving)) if leaving is not None else contextlib.nullcontext():
        with entry_point_run():
            run = tracking.open_run(True, config, _tracked_environment(store, request.node.callspec.id))
            # When the run is left by an error or a stop, before it finished
            if leaving is not None:
                raise leaving
    # Then the run ends with that status, read back from the store
    assert _status(store, run.run_id) == status


def test_a_finished_run_stays_finished(store, tmp_path):
    config = parse_config(["--train", str(tmp_path)], env={})
    with entry_point_run():
        run = tracking.open_run(True, config, _tracked_environment(store, "finished"))
        run.finish({"val_ndcg@10": 0.5}, step=3, model_dir=tmp_path / "model")
    assert _status(store, run.run_id) == "FINISHED"


def test_lightnings_end_of_fit_leaves_the_run_open(store):
    # Given the Lightning entry point's logger on a job's run, which Lightning logged to during fit
    run = TrackedRun(TrackingTarget.from_environment(_tracked_environment(store, "lightning-fit")))
    logger = mlflow_logger(run)
    logger.log_metrics({"val_ndcg@10": 0.5}, step=4)
    # When Lightning finalizes it, as its trainer does after fit, validate and test, and on a SIGTERM's stop
    logger.finalize("success")
    logger.finalize("failed")
    # Then the run is still open: the model is not written yet (or the job resumes later)
    assert _status(store, run.run_id) == "RUNNING"
    assert [entry.value for entry in run.client.get_metric_history(run.run_id, "val_ndcg_at_10")] == [0.5]


def test_a_run_that_cannot_be_ended_does_not_hide_the_error(store, tmp_path, monkeypatch, capsys):
    # Given a tracked run whose tracking server cannot be reached by the time the entry point fails
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    config = parse_config(["--train", str(tmp_path)], env={})
    with pytest.raises(ValueError, match="the run's own error"):
        with entry_point_run():
            run = tracking.open_run(True, config, _tracked_environment(store, "unreachable"))
            run.client = MlflowClient(f"http://127.0.0.1:{free_port()}")  # nothing listens there
            raise ValueError("the run's own error")
    # Then the entry point's error goes on, and stderr says the run could not be ended
    assert f"MLflow: could not end run {run.run_id} FAILED" in capsys.readouterr().err


@pytest.mark.parametrize("script", ENTRY_POINTS)
def test_a_job_that_fails_on_its_data_has_a_failed_run(script, store, tmp_path):
    # Given a tracked job whose training file holds a row the reader refuses
    channel = tmp_path / "train"
    channel.mkdir()
    (channel / "rank.train").write_text("1 qid:1 1:0.5 2:0.1\n0 qid:1 1:nan 2:0.2\n")
    flags = ["--train", str(channel), "--model-dir", str(tmp_path / "model"), "--output-data-dir",
             str(tmp_path / "output"), "--checkpoint-dir", str(tmp_path / "checkpoints"), *TINY_MODEL_FLAGS]
    job = f"failing-{tracked_job_name(script)}"
    # When the entry point runs it
    finished = subprocess.run([sys.executable, script, *flags], cwd=TRAINING_CODE, capture_output=True, text=True,
                              env=script_env(**_tracked_environment(store, job)), timeout=180)
    # Then it fails on the data, and the job's run, opened before the data with the job's flags, says FAILED
    assert finished.returncode == 2 and "rank.train" in finished.stderr.strip().splitlines()[-1]
    client = MlflowClient(store)
    [run] = client.search_runs([client.get_experiment_by_name(TRACKED_EXPERIMENT).experiment_id],
                               filter_string=f"attributes.run_name = '{job}'")
    assert run.info.status == "FAILED"
    assert run.data.params["train.batch_size"] == str(parse_config(flags, env={}).train.batch_size)
