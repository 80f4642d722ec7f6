"""Defaults sized for the devices a run trains on: the CPU keeps the flags' own (the demo's speed), a GPU takes a wider
model and smaller batches, any flag the user sets wins, and the run says which it took."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sagemaker_distributed
import torch
from ranker.config import ModelConfig, TrainConfig, parse_config
from ranker.model.mlp import RankingMLP
from ranker.training import session


@pytest.fixture
def train_flag(tmp_path: Path) -> list[str]:
    (tmp_path / "train").mkdir()
    return ["--train", str(tmp_path / "train")]


def test_a_cpu_run_keeps_the_defaults_the_demo_runs_with(train_flag):
    config = parse_config(train_flag, env={}, device_type="cpu")
    # The CPU demo's model, batch rule and epochs, as they were before defaults depended on the device
    assert (config.model.width, config.train.batch_size, config.train.epochs, config.train.early_stopping) == (
        128, 0, 30, 5)
    assert config.defaults.name == "cpu" and config.flags_over_defaults == ()
    assert config.describe_defaults() == "defaults: cpu (each flag's own)"


def test_a_gpu_run_takes_a_wider_model_smaller_batches_and_a_longer_patience(train_flag):
    on_cpu = parse_config(train_flag, env={}, device_type="cpu")
    on_gpu = parse_config(train_flag, env={}, device_type="cuda")
    assert (on_gpu.model.width, on_gpu.train.batch_size, on_gpu.train.epochs, on_gpu.train.early_stopping) == (
        2048, 32, 100, 10)
    # Nothing else changes: the same model otherwise, the same learning rate and loss
    assert on_gpu.model == ModelConfig(**{**vars(on_cpu.model), "width": 2048})
    assert on_gpu.train == TrainConfig(**{**vars(on_cpu.train), "batch_size": 32, "epochs": 100,
                                          "early_stopping": 10})
    assert on_gpu.describe_defaults() == "defaults: gpu (--width 2048 --batch-size 32 --epochs 100 --early-stopping 10)"


def test_a_flag_the_user_sets_wins_over_the_gpu_defaults_even_at_the_cpu_defaults_value(train_flag):
    # Given a GPU run whose hyperparameters set the width to the CPU's own default and the batch as SageMaker spells it
    config = parse_config([*train_flag, "--width", "128", "--batch_size", "64"], env={}, device_type="cuda")
    # Then both flags hold, the GPU's other defaults still apply, and the log line names the flags that won
    assert (config.model.width, config.train.batch_size, config.train.epochs) == (128, 64, 100)
    assert config.flags_over_defaults == ("--width", "--batch-size")
    assert config.describe_defaults() == ("defaults: gpu (--epochs 100 --early-stopping 10); set by flag instead: "
                                          "--width --batch-size")


def test_a_device_other_than_a_gpu_keeps_the_cpu_defaults(train_flag):
    assert parse_config(train_flag, env={}, device_type="mps").defaults.name == "cpu"


def test_help_gives_each_default_and_its_gpu_value(capsys):
    with pytest.raises(SystemExit):
        parse_config(["--help"], env={})
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: 128; 2048 on a GPU)" in text and "(default: 0.1)" in text


def test_the_entry_points_size_their_defaults_for_the_device_they_train_on(train_flag, monkeypatch):
    # On this machine's CPU
    assert session.run_config(train_flag, "", env={}).defaults.name == "cpu"
    # With the device faked to be a GPU: the same call takes the GPU's defaults
    monkeypatch.setattr(sagemaker_distributed, "device_for", lambda topology: torch.device("cuda", 0))
    assert session.run_config(train_flag, "", env={}).model.width == 2048


def test_metrics_json_says_which_defaults_the_run_took(train_flag, tmp_path):
    config = parse_config([*train_flag, "--model-dir", str(tmp_path / "model"), "--output-data-dir",
                           str(tmp_path / "output"), "--width", "8", "--num-layers", "2"], env={}, device_type="cuda")
    model_config = session.model_config_for(config, num_features=3)
    model = RankingMLP(model_config)
    session.write_artifacts(config, model_config, model, [], {"train_loss": 1.0, "val_ndcg@10": 0.5})
    metrics = json.loads((tmp_path / "model" / "metrics.json").read_text())
    assert metrics["defaults"] == "gpu" and metrics["val_ndcg@10"] == 0.5
