"""The demo's tuning run at small size: the trigger builds and checks the ranker's training job, a tuning job over
its `learning-rate` (log) and `epochs` (integer) runs its trials through local SageMaker two at a time, and the
summary tables the trials and the best one."""

from __future__ import annotations

from pathlib import Path

import pytest

from local_mode.demo import DemoOptions, run_tuning_demo_job
from local_mode.pipeline import LocalPipeline
from local_mode.tuning_demo import TuningOptions, render_tuning_summary

pytestmark = pytest.mark.slow


def test_a_tuning_demo_runs_the_rankers_trials_and_reports_the_best(demo_pipeline: LocalPipeline, letor_data: Path,
                                                                   tmp_path: Path):
    # Given the ranker's single-process job tuned over learning-rate (log) and epochs (integer), 2 trials at once
    tuning = TuningOptions(ranges=(("learning-rate", "continuous:0.0005:0.05:log"), ("epochs", "integer:1:2")),
                           max_jobs=2, max_parallel_jobs=2, random_seed=5)
    options = DemoOptions(queries=64, work_dir=tmp_path, distribution="none", entry_point="train_ddp.py",
                          tuning=tuning)

    # When the demo runs it
    result = run_tuning_demo_job(demo_pipeline, options, letor_data)

    # Then both trials ran the ranker with their drawn values and reported val_ndcg@10
    assert result.status == "Completed", result.failure_reason
    assert result.tuning_job_name.startswith(demo_pipeline.static_settings["job_name_prefix"] + "-")
    assert [row.name[:len(result.tuning_job_name) + 4] for row in result.trials] == [
        f"{result.tuning_job_name}-001", f"{result.tuning_job_name}-002"]
    assert all(row.status == "Completed" and 0 < row.objective <= 1 for row in result.trials)
    assert all(set(row.hyperparameters) == {"learning-rate", "epochs"} for row in result.trials)
    # And the best is the trial with the highest objective, shown in the summary beside each trial
    best = max(result.trials, key=lambda row: row.objective)
    assert (result.best_job, result.best_objective) == (best.name, best.objective)
    summary = render_tuning_summary(result)
    assert all(row.name in summary for row in result.trials) and f"best:       {best.name}" in summary
    assert result.notes == []
    # And each trial is the trigger's training job: the demo's epochs override gave way to the tuned value
    for row in result.trials:
        job = demo_pipeline.sagemaker.describe_training_job(TrainingJobName=row.name)
        assert job["HyperParameters"]["epochs"] == row.hyperparameters["epochs"]
        assert "CheckpointConfig" not in job
