"""What a script reads from SageMaker's contract (folders, channels, hyperparameters) and what it leaves when it
fails (the failure file SageMaker reports as FailureReason)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sagemaker_distributed import paths
from sagemaker_distributed.failure import failure_reported

JOB_ENV = {"SM_TRAINING_ENV": "{}", "SM_MODEL_DIR": "/opt/ml/model", "SM_OUTPUT_DATA_DIR": "/opt/ml/output/data",
           "SM_OUTPUT_DIR": "/opt/ml/output", "SM_CHANNEL_TRAIN": "/opt/ml/input/data/train",
           "SM_HPS": '{"epochs": 3, "loss": "listwise"}'}


def test_in_a_job_every_folder_is_the_one_sagemaker_uploads_or_syncs():
    assert paths.in_training_job(JOB_ENV)
    assert (paths.model_dir(JOB_ENV), paths.output_data_dir(JOB_ENV), paths.checkpoint_dir(JOB_ENV)) == (
        Path("/opt/ml/model"), Path("/opt/ml/output/data"), Path("/opt/ml/checkpoints"))
    assert paths.tensorboard_dir(JOB_ENV) == Path("/opt/ml/output/tensorboard")
    assert paths.channel("train", JOB_ENV) == Path("/opt/ml/input/data/train")
    assert paths.channel("validation", JOB_ENV) is None
    assert paths.hyperparameters(JOB_ENV) == {"epochs": 3, "loss": "listwise"}


def test_local_mode_relocates_the_synced_checkpoint_folder():
    env = {**JOB_ENV, "SAGEMAKER_BASE_DIR": "/tmp/job-7"}
    assert paths.checkpoint_dir(env) == Path("/tmp/job-7/checkpoints")


def test_outside_a_job_checkpoints_belong_to_the_runs_own_folder():
    assert not paths.in_training_job({})
    assert paths.checkpoint_dir({}) == Path("output/checkpoints")
    assert paths.checkpoint_dir({}, run_dir=Path("runs/a")) == Path("runs/a/checkpoints")


def test_a_usage_error_is_one_line_on_stderr_exit_2_and_the_failure_reason(tmp_path, capsys):
    env = {"SM_OUTPUT_DIR": str(tmp_path)}
    with pytest.raises(SystemExit) as exited, failure_reported(env, usage_errors=(KeyError,)):
        raise KeyError("epochs")
    assert exited.value.code == 2
    assert capsys.readouterr().err == "error: 'epochs'\n"
    assert (tmp_path / "failure").read_text() == "KeyError: 'epochs'"


def test_any_other_error_keeps_its_traceback_and_the_first_failure_wins(tmp_path):
    env = {"SM_OUTPUT_DIR": str(tmp_path)}
    with pytest.raises(RuntimeError, match="first"), failure_reported(env):
        raise RuntimeError("first")
    with pytest.raises(RuntimeError, match="collateral"), failure_reported(env):
        raise RuntimeError("collateral")
    assert (tmp_path / "failure").read_text() == "RuntimeError: first"


def _job_config(base: Path, train_distribution: str) -> None:
    """The three files SageMaker writes into /opt/ml/input/config before the container starts."""
    config = base / "input" / "config"
    config.mkdir(parents=True)
    (config / "hyperparameters.json").write_text("{}")
    (config / "resourceconfig.json").write_text(json.dumps({"current_host": "algo-2", "hosts": ["algo-1", "algo-2"],
                                                            "network_interface_name": "eth0"}))
    (config / "inputdataconfig.json").write_text(json.dumps({
        "train": {"TrainingInputMode": "File", "S3DistributionType": train_distribution, "RecordWrapperType": "None"},
        "validation": {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated",
                       "RecordWrapperType": "None"}}))


def test_a_script_learns_its_channels_sharding_from_what_the_toolkit_passes(tmp_path):
    # Given a job whose train channel SageMaker sharded by key, its config folder read by the real toolkit
    _job_config(tmp_path, "ShardedByS3Key")
    toolkit = subprocess.run(
        [sys.executable, "-c", "import json; from sagemaker_training import environment; "
                               "print(json.dumps(environment.Environment().to_env_vars()))"],
        env={"PATH": os.environ["PATH"], "SAGEMAKER_BASE_DIR": str(tmp_path), "SM_STUDIO_LOCAL_MODE": "true"},
        capture_output=True, text=True, check=True, timeout=60)
    script_env = json.loads(toolkit.stdout.strip().splitlines()[-1])
    # When the script asks sagemaker_distributed, from the toolkit's variables or from the file alone
    from_variables = {name: paths.channel_distribution(name, script_env) for name in ("train", "validation", "test")}
    from_file = paths.channel_distribution("train", {"SAGEMAKER_BASE_DIR": str(tmp_path)})
    # Then the train channel is this host's share, the others every host's, and a missing channel replicated
    assert from_variables == {"train": "ShardedByS3Key", "validation": "FullyReplicated", "test": "FullyReplicated"}
    assert from_file == "ShardedByS3Key" and paths.channel_is_sharded("train", script_env)


def test_outside_a_job_every_channel_is_whole():
    assert paths.channel_distribution("train", {"SAGEMAKER_BASE_DIR": "/nonexistent"}) == "FullyReplicated"
    assert not paths.channel_is_sharded("train", {"SAGEMAKER_BASE_DIR": "/nonexistent"})
