"""A tuning job of a script not written for this pipeline: Lightning's stock `BoringModel` (examples/), bundled from its
own folder by a stack synthesized with `-c source_dir=... -c entry_point=train.py -c metric_definitions=...`, tuned
through the trigger over its `--epochs` with an objective of its own, `steps`, which one of those metric definitions
reads from the line it prints. The trigger holds such a script to an objective among its metric definitions; the
registrar refuses its best model, which has no serving handler, and says why."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from shared_stacks import BORING_MODEL

from local_mode.cli import render_tuning_summary
from local_mode.demo import DemoOptions, TriggerRefused, bring_your_own_context, run_tuning_demo_job
from local_mode.aws.moto_endpoint import MotoEndpoint
from local_mode.pipeline import LocalPipeline

pytestmark = pytest.mark.slow

# BoringModel: 64 samples in batches of one; on one process every epoch is 64 steps, and train.py prints the total.
STEPS_PER_EPOCH = 64
RANGES = {"epochs": {"type": "integer", "min": 1, "max": 3}}
TRIALS = 2
# Its metric definitions read `steps` only.
LIGHTNING = dataclasses.replace(BORING_MODEL, distribution="none")


@pytest.fixture(scope="module")
def lightning_pipeline(moto: MotoEndpoint, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPipeline]:
    # The PyTorch 2.2.0 container's rules allow every distribution; local hosts run this Python whatever it is.
    with LocalPipeline(jobs_dir=tmp_path_factory.mktemp("tuned-lightning-jobs"), stop_grace_seconds=10, moto=moto,
                       context={"framework_version": "2.2.0", **bring_your_own_context(LIGHTNING)}) as pipeline:
        yield pipeline


def tuned(section: dict, work_dir: Path) -> DemoOptions:
    return dataclasses.replace(LIGHTNING, tuning={"ranges": RANGES, **section}, work_dir=work_dir)


def test_a_stock_lightning_module_is_tuned_on_its_own_metric_and_told_why_its_best_model_is_not_registered(
        lightning_pipeline, letor_data, tmp_path, notification_queue):
    # Given a tuning section maximising the script's own `steps`: 2 trials of 1 to 3 epochs, side by side (each trial
    # is a Lightning process of its own; how many run at once is test_tuning_demo's and the tuning service's to show)
    options = tuned({"objective_metric": "steps", "objective_type": "Maximize", "strategy": "Random",
                     "max_jobs": TRIALS, "max_parallel_jobs": 2, "random_seed": 2}, tmp_path)

    # When its dataset version lands and the demo follows the tuning job the trigger starts
    with notification_queue(lightning_pipeline, "tuned-lightning-notifications") as notifications:
        result = run_tuning_demo_job(lightning_pipeline, options, letor_data)
        published = notifications()

    # Then every trial trained for its drawn epochs, and the metric definition read its steps as the objective
    assert result.status == "Completed", result.failure_reason
    assert result.objective == "Maximize steps" and len(result.trials) == TRIALS
    for row in result.trials:
        assert row.status == "Completed"
        assert row.objective == STEPS_PER_EPOCH * int(row.hyperparameters["epochs"])
    # And the best is the first trial with the most epochs, printed in the summary
    most = max(int(row.hyperparameters["epochs"]) for row in result.trials)
    best = next(row for row in result.trials if int(row.hyperparameters["epochs"]) == most)
    assert (result.best_job, result.best_objective) == (best.name, STEPS_PER_EPOCH * most)
    summary = render_tuning_summary(result)
    assert "objective:  Maximize steps" in summary and f"best:       {best.name}" in summary
    assert all(row.name in summary for row in result.trials)
    # And its model, which carries no serving handler (train.py saves its weights only), is not registered: the
    # summary and the notification say why, and the notification still counts the trials and names the winner
    assert result.model_package_arn is None
    assert "holds no code/inference.py" in result.not_registered_reason
    assert f"package:    not registered: {result.not_registered_reason}" in summary
    [refused] = [envelope for envelope in published if envelope["Subject"].startswith("Model not registered")]
    assert refused["Subject"] == f"Model not registered: {result.tuning_job_name}"
    tuning = json.loads(refused["Message"])["tuning"]
    assert (tuning["best_training_job"], tuning["trials"]["total"]) == (best.name, TRIALS)
    assert tuning["objective"] == {"metric": "steps", "type": "Maximize", "value": STEPS_PER_EPOCH * most}


@pytest.mark.parametrize(("section", "refusal"), [
    ({}, "tuning.objective_metric is missing: entry_point='train.py' has no default objective; name one of the "
         "jobs' metrics ['steps']"),
    ({"objective_metric": "val_ndcg@10", "objective_type": "Maximize"},
     "tuning.objective_metric='val_ndcg@10' is not one of the jobs' metric definitions ['steps']"),
])
def test_a_foreign_scripts_objective_must_be_one_of_its_metric_definitions(section, refusal, lightning_pipeline,
                                                                           letor_data, tmp_path):
    # Given a tuning section without an objective, or with the ranker's, which this script's definitions do not read
    # When its dataset version lands / Then the trigger refuses it before starting anything, naming the definitions
    with pytest.raises(TriggerRefused, match="rejected") as refused:
        run_tuning_demo_job(lightning_pipeline, tuned(section, tmp_path), letor_data)
    assert refusal in str(refused.value)
