"""Hyperparameters and directories as SageMaker's container contract delivers them, and the one-line refusals of
what a run cannot take (before any data is read)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from ranker.config import ConfigError, parse_config
from training_launch import TRAINING_CODE, script_env


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """An existing training channel folder (its contents are never read while flags are parsed)."""
    folder = tmp_path / "train"
    folder.mkdir()
    return folder


def test_flags_accept_dash_and_underscore_spellings(data_dir):
    config = parse_config(["--train", str(data_dir), "--batch_size", "7", "--learning-rate", "0.01", "--log1p",
                           "true"], env={})
    assert (config.train.batch_size, config.train.learning_rate, config.data.log1p) == (7, 0.01, True)


def test_directories_default_from_sagemaker_environment(tmp_path):
    channels = {name: tmp_path / "input" / "data" / name for name in ("train", "test")}
    for folder in channels.values():
        folder.mkdir(parents=True)
    env = {"SM_CHANNEL_TRAIN": str(channels["train"]), "SM_CHANNEL_TEST": str(channels["test"]),
           "SM_MODEL_DIR": "/opt/ml/model", "SM_OUTPUT_DATA_DIR": "/opt/ml/output/data",
           "SAGEMAKER_BASE_DIR": "/tmp/local-job"}
    config = parse_config([], env=env)
    assert config.data.train == channels["train"]
    assert config.data.validation is None and config.data.test == channels["test"]
    assert config.paths.model_dir == Path("/opt/ml/model")
    assert config.paths.checkpoint_dir == Path("/tmp/local-job/checkpoints")


def test_flags_override_the_environment(data_dir):
    config = parse_config(["--model-dir", "here", "--checkpoint-dir", "ck"], env={"SM_CHANNEL_TRAIN": str(data_dir),
                                                                                  "SM_MODEL_DIR": "/opt/ml/model"})
    assert (config.paths.model_dir, config.paths.checkpoint_dir) == (Path("here"), Path("ck"))


def test_checkpoints_default_to_the_synced_folder_in_a_job_and_to_the_runs_own_folder_outside(data_dir):
    # Given a SageMaker job (the toolkit sets SM_MODEL_DIR) / Then /opt/ml/checkpoints, which SageMaker syncs
    train = ["--train", str(data_dir)]
    in_job = parse_config(train, env={"SM_MODEL_DIR": "/opt/ml/model"})
    assert in_job.paths.checkpoint_dir == Path("/opt/ml/checkpoints")
    # Given no job / Then a folder under the run's own output folder, never one every run on the machine shares
    assert parse_config(train, env={}).paths.checkpoint_dir == Path("output/checkpoints")
    elsewhere = parse_config([*train, "--output-data-dir", "runs/b"], env={})
    assert elsewhere.paths.checkpoint_dir == Path("runs/b/checkpoints")


def test_tensorboard_logs_go_where_sagemakers_tensorboard_output_config_uploads_them(data_dir):
    # Given the toolkit's output folder / When no flag is given / Then the logs go to its tensorboard folder, the
    # default LocalPath of a TensorBoardOutputConfig; outside SageMaker, beside the other outputs
    train = ["--train", str(data_dir)]
    assert parse_config(train, env={"SM_OUTPUT_DIR": "/opt/ml/output"}).paths.tensorboard_dir == Path(
        "/opt/ml/output/tensorboard")
    assert parse_config(train, env={}).paths.tensorboard_dir == Path("output/tensorboard")


def test_missing_training_channel_says_how_to_give_one():
    with pytest.raises(ConfigError, match="SM_CHANNEL_TRAIN"):
        parse_config([], env={})


@pytest.mark.parametrize(("flags", "message"), [
    # Values outside the range or choices declared beside each field in ranker/config.py
    (["--dropout", "1.5"], "--dropout: bad value 1.5: use a number >= 0 and < 1"),
    (["--dropout", "nan"], "--dropout: bad value nan: use a number >= 0 and < 1"),
    (["--learning-rate", "-1"], "--learning-rate: bad value -1.0: use a number > 0"),
    (["--batch_size", "-1"], "--batch-size: bad value -1: use a whole number >= 0"),
    (["--validation-fraction", "1"], "--validation-fraction: bad value 1.0: use a number > 0 and < 1"),
    (["--epochs", "0"], "--epochs: bad value 0: train for at least 1 epoch or set --max-steps"),
    (["--precision", "fp16"], "argument --precision: invalid choice: 'fp16' (choose from 'bf16', 'fp32')"),
    (["--loss", "lambdarank"], "argument --loss: invalid choice: 'lambdarank' (choose from 'pairwise', 'graded_listwise', 'listwise', 'pointwise')"),
    # Values of the wrong type, and flags the scripts do not have
    (["--epochs", "ten"], "argument --epochs: invalid int value: 'ten'"),
    (["--log1p", "maybe"], "argument --log1p: expected true or false, got 'maybe'"),
    (["--learning-rat", "0.1"], "unknown flag(s) ['--learning-rat', '0.1']: remove them"),
])
def test_a_bad_flag_is_one_line_naming_the_flag_the_value_and_what_is_allowed(data_dir, flags, message):
    # Given an existing training channel and one bad flag / When the flags are parsed
    with pytest.raises(ConfigError) as raised:
        parse_config(["--train", str(data_dir), *flags], env={})
    # Then the refusal is one line that says what is wrong and what to use
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("flag", ["--train", "--validation", "--test"])
def test_a_channel_that_does_not_exist_is_refused_before_any_data_is_read(data_dir, tmp_path, flag):
    # Given a channel path that does not exist / When the flags are parsed / Then the flag and the path are named
    missing = tmp_path / "nonexistent"
    flags = ["--train", str(data_dir)] if flag != "--train" else []
    with pytest.raises(ConfigError, match=rf"^{flag}: bad value '{missing}': use an existing file or folder$"):
        parse_config([*flags, flag, str(missing)], env={})


def test_config_error_is_a_value_error_so_existing_handlers_still_catch_it():
    assert issubclass(ConfigError, ValueError)


@pytest.mark.parametrize("script", ["train_ddp.py", "train_lightning.py"])
@pytest.mark.parametrize(("flags", "line"), [
    (["--dropout", "1.5"], "--dropout: bad value 1.5: use a number >= 0 and < 1"),
    (["--learning-rate", "-1"], "--learning-rate: bad value -1.0: use a number > 0"),
    (["--train", "/nonexistent"], "--train: bad value '/nonexistent': use an existing file or folder"),
])
def test_each_entry_point_refuses_a_bad_flag_with_one_line_and_the_jobs_failure_reason(script, flags, line, data_dir,
                                                                                      tmp_path):
    # Given an entry point started with one bad flag, with SageMaker's output folder for the failure reason
    output = tmp_path / "sm-output"
    result = subprocess.run([sys.executable, script, "--train", str(data_dir), *flags],
                            env=script_env(SM_OUTPUT_DIR=str(output)), cwd=TRAINING_CODE, capture_output=True,
                            text=True, timeout=180)
    # Then it stops before any work with that one line, no traceback, and the same reason for DescribeTrainingJob
    assert result.returncode == 2, result.stderr[-2000:]
    assert [text for text in result.stderr.splitlines() if text.strip()] == [f"error: {line}"]
    assert (output / "failure").read_text() == f"ConfigError: {line}"
    assert result.stdout == ""
