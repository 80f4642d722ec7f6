"""What a script reads from SageMaker's contract (folders, channels, hyperparameters) and what it leaves when it
fails (the failure file SageMaker reports as FailureReason)."""

from __future__ import annotations

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
