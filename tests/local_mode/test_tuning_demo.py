"""A tuning job of the ranker through the deployed pipeline in local mode: a dataset version whose manifest has a
`tuning` section over `learning-rate` (Logarithmic) and `epochs` (integer) lands, the trigger checks it and starts
the tuning job (once, however often the event arrives), local SageMaker runs its 3 trials 2 at a time (the third
waits for a place), and the registrar registers the best trial's model and says how many trials ran."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from local_mode.cli import render_tuning_summary
from local_mode.demo import channels_of, follow_tuning_job, profiles
from local_mode.pipeline import LocalPipeline
from small_model import SMALL_MODEL

pytestmark = pytest.mark.slow

RATES = (0.0005, 0.05)
TRIALS = 3
RANKER_TUNING_MANIFEST = {
    "training": {"entry_point": "train_ddp.py", "distribution": "none",
                 "instance_type": profiles.DEFAULT_INSTANCE_TYPES["none"],
                 "hyperparameters": {"epochs": 3, **SMALL_MODEL}},
    "tuning": {"strategy": "Random", "max_jobs": TRIALS, "max_parallel_jobs": 2, "random_seed": 5,
               "ranges": {"learning-rate": {"type": "continuous", "min": RATES[0], "max": RATES[1],
                                            "scaling": "Logarithmic"},
                          "epochs": {"type": "integer", "min": 1, "max": 2}}},
}


def test_a_manifests_tuning_section_tunes_the_ranker_through_the_trigger_and_registers_the_best(
        demo_pipeline: LocalPipeline, letor_data: Path, notification_queue, tmp_path: Path):
    with notification_queue(demo_pipeline, "tuning-notifications") as notifications:
        # Given a dataset version whose manifest asks for 3 trials of the ranker, 2 at a time
        marker = demo_pipeline.upload_channels(channels_of(letor_data), dataset="tuned-letor", version="v1",
                                               manifest=RANKER_TUNING_MANIFEST)

        # When its marker's event reaches the trigger, and reaches it again (EventBridge delivers at least once)
        first, again = demo_pipeline.deliver(marker), demo_pipeline.deliver(marker)

        # Then the trigger started one tuning job, and the redelivery found it and started none
        assert (first["status"], first["job_kind"]) == ("started", "tuning"), first
        assert (again["status"], again["job_name"]) == ("duplicate", first["job_name"]), again
        name = first["job_name"]
        result = follow_tuning_job(demo_pipeline, name, tmp_path)
        published = notifications()

    # And its 3 trials ran the ranker with drawn values, each reporting val_ndcg@10, never more than 2 at once
    assert result.status == "Completed", result.failure_reason
    assert [row.name[:len(name) + 4] for row in result.trials] == [f"{name}-{index:03d}"
                                                                    for index in range(1, TRIALS + 1)]
    assert all(row.status == "Completed" and 0 < row.objective <= 1 for row in result.trials)
    for row in result.trials:
        assert RATES[0] <= float(row.hyperparameters["learning-rate"]) <= RATES[1]
        assert row.hyperparameters["epochs"] in ("1", "2")
        # each trial is the trigger's training job, the tuned epochs over the manifest's 3
        job = demo_pipeline.sagemaker.describe_training_job(TrainingJobName=row.name)
        assert job["HyperParameters"]["epochs"] == row.hyperparameters["epochs"]
        assert "CheckpointConfig" not in job
    spans = [(job["CreationTime"], job["TrainingEndTime"]) for job in (
        demo_pipeline.sagemaker.describe_training_job(TrainingJobName=row.name) for row in result.trials)]
    assert max(sum(start <= moment < end for start, end in spans) for moment, _ in spans) <= 2

    # And the best is the trial with the highest objective (the earlier one on a tie), shown beside every trial
    best = max(result.trials, key=lambda row: row.objective)
    assert (result.best_job, result.best_objective) == (best.name, best.objective)
    summary = render_tuning_summary(result)
    assert all(row.name in summary for row in result.trials) and f"best:       {best.name}" in summary
    assert result.notes == []

    # And the best trial's model, and no other, is registered: the package names the trial and its tuning job
    package = demo_pipeline.sagemaker.describe_model_package(ModelPackageName=result.model_package_arn)
    provenance = package["CustomerMetadataProperties"]
    assert (provenance["training-job"], provenance["tuning-job"]) == (best.name, name)
    assert float(provenance["tuning-objective-value"]) == pytest.approx(best.objective)
    assert best.name in package["InferenceSpecification"]["Containers"][0]["ModelDataUrl"]

    # And the notification counts the trials and names the winner
    [registered] = [envelope for envelope in published if envelope["Subject"].startswith("Best of ")]
    assert registered["Subject"].startswith(f"Best of {TRIALS} trials registered")
    tuning = json.loads(registered["Message"])["tuning"]
    assert (tuning["tuning_job"], tuning["best_training_job"]) == (name, best.name)
    assert tuning["trials"]["total"] == tuning["trials"]["completed"] == TRIALS
