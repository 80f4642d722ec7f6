"""The `launch` field end to end through the handler (botocore Stubbers on the real clients), and the
model_trainer request's own parts. What ModelTrainer itself sends: test_model_trainer_conformance.py."""

from __future__ import annotations

import json

import pytest
from training_trigger.model_trainer_request import build_model_trainer_request, model_trainer_hyperparameters
from training_trigger.preflight import service_model_errors

from trigger import test_handler as handler_tests
from trigger.sample_inputs import MODEL_TRAINER_FILES, job_spec, load_event, stack_settings

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics:UserWarning")
stack_environment = handler_tests.stack_environment  # every test runs against the sample stack's settings
FILES = f"s3://ranker-artifacts-example/{MODEL_TRAINER_FILES['prefix']}"


def _dry_run(s3_stub, **payload):
    """The documented manual dataset payload with `payload`'s fields, invoked in dry run."""
    handler_tests._version_listing(s3_stub, {"_SUCCESS": handler_tests.MARKER_ETAG})
    return handler_tests._invoke({**load_event("manual_dataset.json"), **payload})


def test_a_payload_asking_for_the_model_trainer_launch_gets_model_trainers_request(s3_stub, sagemaker_stub):
    # Given the documented manual payload (train_ddp.py, torch_distributed, 2 x ml.g5.12xlarge) with launch
    # model_trainer, on a stack whose default launch is the toolkit
    result = _dry_run(s3_stub, launch="model_trainer")
    # When it is invoked in dry run / Then the checked request starts the SDK v3 drivers, not the toolkit
    assert result["status"] == "dry_run", result
    request = result["request"]
    algorithm = request["AlgorithmSpecification"]
    assert algorithm["ContainerEntrypoint"] == ["/bin/bash"]
    assert algorithm["ContainerArguments"][-1].endswith("/opt/ml/input/data/sm_drivers/sm_train.sh")
    assert "EnableSageMakerMetricsTimeSeries" not in algorithm
    assert algorithm["MetricDefinitions"]  # kept: CloudWatch's metrics and the registrar read them
    # And the drivers of that script under torchrun, the code as loose files, after the data
    assert [(channel["ChannelName"], channel["DataSource"]["S3DataSource"]["S3Uri"], channel.get("InputMode"))
            for channel in request["InputDataConfig"][-2:]] == [
        ("code", f"{FILES}code/", "File"), ("sm_drivers", f"{FILES}sm_drivers/torchrun/train_ddp.py/", "File")]
    # And only the user's hyperparameters, strings as given, no sagemaker_* keys, and GZIP output
    assert request["HyperParameters"] == {"epochs": "5", "batch-size": "512", "loss": "listwise"}
    assert request["OutputDataConfig"]["CompressionType"] == "GZIP"
    assert service_model_errors(request) == []


def test_the_stacks_default_launch_is_what_a_payload_overrides(s3_stub, sagemaker_stub, monkeypatch, tmp_path):
    # Given a stack deployed with launch model_trainer
    from training_trigger.settings import load_settings
    environment = handler_tests.write_stack_settings(tmp_path, default_launch="model_trainer")
    monkeypatch.setenv("STATIC_SETTINGS_FILE", environment["STATIC_SETTINGS_FILE"])
    load_settings.cache_clear()
    # When one payload says nothing and another asks for the toolkit
    default = _dry_run(s3_stub)["request"]
    toolkit = _dry_run(s3_stub, launch="toolkit")["request"]
    # Then the first runs the drivers and the second the toolkit, which sends its script-mode keys
    assert "ContainerEntrypoint" in default["AlgorithmSpecification"]
    assert "ContainerEntrypoint" not in toolkit["AlgorithmSpecification"]
    assert json.loads(toolkit["HyperParameters"]["sagemaker_program"]) == "train_ddp.py"


@pytest.mark.parametrize(("payload", "message"), [
    ({"launch": "trainer"}, "payload.launch='trainer' is not one of ['toolkit', 'model_trainer']"),
    ({"launch": "model_trainer", "distribution": "pytorchddp", "instance_type": "ml.p4d.24xlarge"},
     "launch='model_trainer' runs distribution 'none' or 'torch_distributed', not distribution='pytorchddp': SDK v3 "
     "has no SMDDP and its MPI driver starts only the first host's processes on several hosts; use launch "
     "'toolkit', or distribution 'torch_distributed'"),
    ({"launch": "model_trainer", "entry_point": "ranker/config.py"},
     "launch='model_trainer' starts a Python script at the top of source_dir, not entry_point='ranker/config.py': "
     "use one of ['train_ddp.py', 'train_lightning.py'], or launch 'toolkit'"),
    ({"launch": "model_trainer", "tuning": {"ranges": {"learning-rate": {"type": "continuous", "min": 0.0001,
                                                                          "max": 0.01}}}},
     "launch='model_trainer' with a tuning section: a tuning job's trials run the toolkit launch"),
])
def test_a_launch_that_cannot_start_the_job_is_refused_before_any_call(payload, message, s3_stub, sagemaker_stub,
                                                                       sns_stub):
    # Given a payload whose launch cannot run it (the SageMaker Stubber has nothing queued: a call fails the test)
    handler_tests._expect_rejection_notice(sns_stub)
    if payload["launch"] in ("toolkit", "model_trainer"):  # a known launch is planned: the version is listed
        handler_tests._version_listing(s3_stub, {"_SUCCESS": handler_tests.MARKER_ETAG})
    # When it is invoked
    result = handler_tests._invoke({**load_event("manual_dataset.json"), "dry_run": False, **payload})
    # Then it is rejected, naming the field, the value and the fix
    assert result["status"] == "rejected"
    assert any(error.startswith(message) for error in result["errors"]), result["errors"]


def test_a_dataset_folder_named_like_a_channel_model_trainer_adds_is_refused(s3_stub, sagemaker_stub, sns_stub):
    # Given a dataset version with a `code` folder beside train and validation
    handler_tests._expect_rejection_notice(sns_stub)
    handler_tests._version_listing(s3_stub, {"_SUCCESS": handler_tests.MARKER_ETAG},
                                   channels=("train", "validation", "code"))
    # When a payload asks for the model_trainer launch on it
    result = handler_tests._invoke({**load_event("manual_dataset.json"), "launch": "model_trainer"})
    # Then it is refused before any call, naming the folder
    assert result["errors"] == ["channels: 'code' is a channel launch='model_trainer' adds itself: rename that "
                                "folder or channel"]


def test_hyperparameters_are_encoded_as_model_trainer_encodes_them():
    # Given strings, numbers and a boolean / When encoded / Then strings stay as given, the rest are JSON
    assert model_trainer_hyperparameters({"loss": "listwise", "epochs": 3, "learning-rate": 0.001, "amp": True,
                                          "note": "3"}) == {
        "loss": "listwise", "epochs": "3", "learning-rate": "0.001", "amp": "true", "note": "3"}


def test_a_script_without_distribution_gets_the_basic_drivers_channel_of_that_script():
    # Given a one-process job of train_lightning.py under the model_trainer launch
    spec = job_spec(entry_point="train_lightning.py", distribution="none", launch="model_trainer")
    # When the request is built
    request = build_model_trainer_request(spec, stack_settings())
    # Then its drivers channel is that script's basic driver's
    [drivers] = [channel for channel in request["InputDataConfig"] if channel["ChannelName"] == "sm_drivers"]
    assert drivers["DataSource"]["S3DataSource"]["S3Uri"] == f"{FILES}sm_drivers/basic/train_lightning.py/"
