"""Hyperparameters and directories as SageMaker's container contract delivers them."""

from __future__ import annotations

from pathlib import Path

import pytest
from ranker.config import parse_config


def test_flags_accept_dash_and_underscore_spellings():
    config = parse_config(["--train", "d", "--batch_size", "7", "--learning-rate", "0.01", "--log1p", "true"], env={})
    assert (config.train.batch_size, config.train.learning_rate, config.data.log1p) == (7, 0.01, True)


def test_directories_default_from_sagemaker_environment():
    env = {"SM_CHANNEL_TRAIN": "/opt/ml/input/data/train", "SM_CHANNEL_TEST": "/t", "SM_MODEL_DIR": "/opt/ml/model",
           "SM_OUTPUT_DATA_DIR": "/opt/ml/output/data", "SAGEMAKER_BASE_DIR": "/tmp/local-job"}
    config = parse_config([], env=env)
    assert config.data.train == Path("/opt/ml/input/data/train")
    assert config.data.validation is None and config.data.test == Path("/t")
    assert config.paths.model_dir == Path("/opt/ml/model")
    assert config.paths.checkpoint_dir == Path("/tmp/local-job/checkpoints")


def test_flags_override_the_environment():
    config = parse_config(["--model-dir", "here", "--checkpoint-dir", "ck"], env={"SM_CHANNEL_TRAIN": "x",
                                                                                  "SM_MODEL_DIR": "/opt/ml/model"})
    assert (config.paths.model_dir, config.paths.checkpoint_dir) == (Path("here"), Path("ck"))


def test_checkpoints_default_to_the_synced_folder_in_a_job_and_to_the_runs_own_folder_outside():
    # Given a SageMaker job (the toolkit sets SM_MODEL_DIR) / Then /opt/ml/checkpoints, which SageMaker syncs
    in_job = parse_config(["--train", "d"], env={"SM_MODEL_DIR": "/opt/ml/model"})
    assert in_job.paths.checkpoint_dir == Path("/opt/ml/checkpoints")
    # Given no job / Then a folder under the run's own output folder, never one every run on the machine shares
    assert parse_config(["--train", "d"], env={}).paths.checkpoint_dir == Path("output/checkpoints")
    elsewhere = parse_config(["--train", "d", "--output-data-dir", "runs/b"], env={})
    assert elsewhere.paths.checkpoint_dir == Path("runs/b/checkpoints")


def test_tensorboard_logs_go_where_sagemakers_tensorboard_output_config_uploads_them():
    # Given the toolkit's output folder / When no flag is given / Then the logs go to its tensorboard folder, the
    # default LocalPath of a TensorBoardOutputConfig; outside SageMaker, beside the other outputs
    assert parse_config(["--train", "d"], env={"SM_OUTPUT_DIR": "/opt/ml/output"}).paths.tensorboard_dir == Path(
        "/opt/ml/output/tensorboard")
    assert parse_config(["--train", "d"], env={}).paths.tensorboard_dir == Path("output/tensorboard")


def test_unknown_flag_is_an_error_naming_it(capsys):
    with pytest.raises(SystemExit):
        parse_config(["--train", "d", "--learning-rat", "0.1"], env={})
    assert "--learning-rat" in capsys.readouterr().err


def test_missing_training_channel_says_how_to_give_one():
    with pytest.raises(ValueError, match="SM_CHANNEL_TRAIN"):
        parse_config([], env={})


def test_bad_choice_is_rejected(capsys):
    with pytest.raises(SystemExit):
        parse_config(["--train", "d", "--loss", "lambdarank"], env={})
    assert "lambdarank" in capsys.readouterr().err
