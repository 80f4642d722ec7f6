"""The guards in the synthesized pipeline: the deployed trigger's code, with the settings synthesis wrote into its
bundle (its cost ceilings and readable buckets), refuses what AWS would refuse, before any training job exists."""

from __future__ import annotations

import pytest


@pytest.mark.slow  # the demo pipeline synthesizes the app when its sources changed
def test_a_manifest_above_the_cost_ceiling_is_refused_and_starts_nothing(demo_pipeline, letor_data):
    # Given a dataset version whose manifest.json asks for far more instances than the stack's ceiling
    ceiling = demo_pipeline.static_settings["max_instance_count"]
    marker = demo_pipeline.upload_dataset(letor_data, dataset="typo", version="v1",
                                          manifest={"training": {"instance_count": 400}})

    # When its marker event reaches the trigger
    result = demo_pipeline.deliver(marker)

    # Then it is rejected naming the field, the value and the ceiling, and no job was created
    assert result["status"] == "rejected", result
    assert any(f"training.instance_count=400 exceeds the pipeline's ceiling max_instance_count={ceiling}" in error
               for error in result["errors"]), result["errors"]
    assert demo_pipeline.sagemaker.list_training_jobs(NameContains="typo")["TrainingJobSummaries"] == []


@pytest.mark.slow
def test_a_manual_payload_reaching_outside_the_project_with_reserved_tags_is_refused(demo_pipeline):
    # When a manual payload names another account's bucket and a tag in AWS's reserved namespace
    result = demo_pipeline.invoke_trigger({"channels": {"train": "s3://someone-elses-bucket/corpus/train/"},
                                           "tags": {"aws:owner": "me"}, "job_name": "ranker-outside"})

    # Then both are named with their fix, and no job was created
    assert result["status"] == "rejected", result
    errors = " | ".join(result["errors"])
    assert "channels.train='s3://someone-elses-bucket/corpus/train/' is in bucket 'someone-elses-bucket'" in errors
    assert "add the bucket to extra_data_buckets" in errors
    assert "payload.tags.aws:owner: the tag key 'aws:owner' starts with 'aws:'" in errors
    assert demo_pipeline.sagemaker.list_training_jobs(NameContains="outside")["TrainingJobSummaries"] == []
