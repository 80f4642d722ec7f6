"""The trigger invoked as the Lambda runtime invokes it: its own process, the synthesized code folder and the
template's environment, with only the endpoint URLs pointing at the local services."""

from __future__ import annotations

import pytest

from local_mode.aws.trigger_invocation import invoke_trigger


@pytest.mark.slow  # the demo pipeline synthesizes the app when its sources changed
def test_a_dry_run_builds_the_request_from_the_templates_environment(demo_pipeline, letor_data):
    # Given a complete dataset version in the stack's data bucket
    demo_pipeline.upload_dataset(letor_data, dataset="dry", version="v1", manifest={})

    # When a manual dry-run payload is invoked on the synthesized function (one process: the stack's default
    # torch_distributed on one single-GPU instance is refused)
    result = demo_pipeline.invoke_trigger({"dataset": "dry", "version": "v1", "distribution": "none",
                                           "dry_run": True})

    # Then the request it built names the stack's role, buckets, bundle and metric definitions, resolved locally
    environment = demo_pipeline.environment
    assert result["status"] == "dry_run", result
    request = result["request"]
    assert request["RoleArn"] == environment["ROLE_ARN"]
    assert request["OutputDataConfig"]["S3OutputPath"] == environment["OUTPUT_S3_URI"]
    assert request["HyperParameters"]["sagemaker_submit_directory"] == f'"{environment["SOURCE_BUNDLE_URI"]}"'
    assert request["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3Uri"] == (
        f"s3://{environment['DATA_BUCKET']}/{demo_pipeline.version_root('dry', 'v1')}train/")
    # And nothing was started
    assert demo_pipeline.sagemaker.list_training_jobs(NameContains="dry")["TrainingJobSummaries"] == []


@pytest.mark.slow
def test_an_object_that_is_no_marker_is_ignored(demo_pipeline, letor_data):
    # Given a data file landing in a dataset version (not its marker)
    demo_pipeline.upload_dataset(letor_data, dataset="partial", version="v1", manifest={})
    data_key = demo_pipeline.version_root("partial", "v1") + "train/rank.train"

    # When its event reaches the trigger
    result = demo_pipeline.deliver(data_key)

    # Then the trigger ignores it and starts nothing
    assert (result["status"], result["job_name"]) == ("ignored", None)


def test_a_crashing_handler_raises_with_its_log(tmp_path):
    # Given a function whose handler raises
    (tmp_path / "broken.py").write_text("def handle(event, context):\n    raise KeyError('DATA_BUCKET')\n")

    # When it is invoked / Then the error carries the handler's traceback
    with pytest.raises(RuntimeError, match=r"(?s)exit 1.*KeyError: 'DATA_BUCKET'"):
        invoke_trigger({}, account="123456789012", function_environment={}, s3_url="http://127.0.0.1:9",
                       sns_url="http://127.0.0.1:9", sagemaker_url="http://127.0.0.1:9", code_dir=tmp_path,
                       handler="broken.handle")
