"""Both entry points log a tracked job to its MLflow run: every flag, each metric line (the validation NDCG@10 of
every validation among them), the final metrics and the model's location, read back here through MLflow's client.

The runs are the session's two-rank runs (conftest.two_rank_runs), which the trigger's variables point at a SQLite
store; what they printed is the oracle: every metric line rank 0 printed is in the run, at its step.
"""

from __future__ import annotations

import json
import math

import pytest
from conftest import ENTRY_POINTS, TRACKED_EXPERIMENT, TRACKED_OUTPUT_PATH, tracked_job_name
from mlflow.tracking import MlflowClient
from ranker.config import parse_config
from ranker.training.tracking import TrackedRun, TrackingTarget, metric_name, run_parameters
from test_lightning_logs import metric_lines

pytestmark = pytest.mark.slow


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


def test_a_rerun_of_the_same_job_logs_to_the_run_it_started(tmp_path):
    # Given a job whose run was opened (then SageMaker retried it, or it resumed after a spot interruption)
    target = TrackingTarget(f"sqlite:///{tmp_path / 'mlflow.db'}", "ranker-web-search", "ranker-web-search-1",
                            run_id=None, output_path=None)
    first = TrackedRun(target)
    # When the rerun opens its run / Then it is the same one, and a job of another name gets its own
    assert TrackedRun(target).run_id == first.run_id
    other = TrackingTarget(target.tracking_uri, target.experiment_name, "ranker-web-search-2", None, None)
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
