"""Checkpoints belong to one run: outside SageMaker each run resumes from its own folder, and a checkpoint of another
model or data shape in the folder it is given is refused, naming --checkpoint-dir, instead of crashing in
`load_state_dict` or continuing someone else's training.

The native checkpoints another run left are written by the native loop's own checkpoint writer
(`save_training_state`, as a run writes one at a checkpoint step) for a model built from that run's flags: a run
reads nothing of them before it resumes or refuses them but the model's shapes, which need no training."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from ranker.config import parse_config
from ranker.data.channels import load_channel
from ranker.training import checkpoint, engine
from ranker.training.session import model_config_for

from training_launch import TINY_MODEL_FLAGS, TRAINING_CODE, run_dirs, script_env

pytestmark = pytest.mark.slow


def wider_flags(width: str) -> list[str]:
    return [flag if flag != "16" else width for flag in TINY_MODEL_FLAGS]


def leave_native_checkpoint(channel: Path, flags: list[str]) -> Path:
    """The checkpoint folder of a train_ddp.py run on `channel` with `flags` (its --checkpoint-dir, else the one the
    configuration derives), holding what the run writes at step 2 of 4; returns the folder."""
    config = parse_config(["--train", str(channel), *flags, "--max-steps", "4"], env={})
    model = engine.build_model(model_config_for(config, load_channel(channel).num_features), torch.device("cpu"))
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.train.learning_rate)
    checkpoint.save_training_state(config.paths.checkpoint_dir, True, model=model, optimizer=optimizer,
                                   scheduler=torch.optim.lr_scheduler.ConstantLR(optimizer, factor=1.0), step=2,
                                   epoch=0, position=2, history=[])
    return config.paths.checkpoint_dir


def run_outside_sagemaker(channel: Path, working_folder: Path, name: str, width: str) -> None:
    """train_ddp.py from `working_folder` with output folders under `name` and no --checkpoint-dir."""
    subprocess.run([sys.executable, str(TRAINING_CODE / "train_ddp.py"), "--train", str(channel), *wider_flags(width),
                    "--max-steps", "4", "--checkpoint-every", "2", *outside_sagemaker_folders(working_folder, name)],
                   env=script_env(), cwd=working_folder, check=True, capture_output=True, timeout=180)


def outside_sagemaker_folders(working_folder: Path, name: str) -> list[str]:
    return ["--model-dir", str(working_folder / name / "model"), "--output-data-dir",
            str(working_folder / name / "output")]


@pytest.fixture
def width_16_checkpoints(request, script, synthetic_channel, tmp_path_factory) -> Path:
    """A checkpoint folder another width-16 run of `script` wrote: the native loop's writer for the native one, and
    the Lightning one of the session's two-rank run (its checkpoint keeps the model's shapes whatever the ranks)."""
    if script == "train_ddp.py":
        folder = tmp_path_factory.mktemp("width-16") / "checkpoints"
        return leave_native_checkpoint(synthetic_channel, [*wider_flags("16"), "--checkpoint-dir", str(folder)])
    return request.getfixturevalue("two_rank_runs")[script][0].checkpoint_dir


@pytest.mark.parametrize("script", ["train_ddp.py", "train_lightning.py"])
def test_a_checkpoint_of_another_model_is_refused_naming_the_flag(script, synthetic_channel, width_16_checkpoints,
                                                                  tmp_path):
    # Given a folder holding another run's checkpoint (width 16), a copy: the run it came from is read by other tests
    dirs = run_dirs(tmp_path)
    shutil.copytree(width_16_checkpoints, dirs.checkpoint_dir)
    assert any(dirs.checkpoint_dir.rglob("*.pt")) or any(dirs.checkpoint_dir.rglob("*.ckpt"))

    # When a run of another width is pointed at that folder
    result = subprocess.run([sys.executable, script, "--train", str(synthetic_channel), *wider_flags("24"),
                             "--max-steps", "4", *dirs.flags()], env=script_env(), cwd=TRAINING_CODE,
                            capture_output=True, text=True, timeout=180)

    # Then it stops with one line that names the folder's flag and what to do, and trains nothing
    assert result.returncode == 2, result.stderr[-3000:]
    [line] = [text for text in result.stderr.splitlines() if text.startswith("error:")]
    assert line.startswith("error: checkpoint_dir: ") and "another model or data shape" in line
    assert "pass --checkpoint-dir" in line
    assert "Traceback" not in result.stderr


def test_outside_sagemaker_two_runs_in_one_folder_do_not_share_checkpoints(synthetic_channel, tmp_path,
                                                                           monkeypatch):
    # Given a working folder where a width-16 run outside SageMaker (output folders under `a`, no --checkpoint-dir)
    # left a checkpoint where its configuration, read from that folder, puts it
    monkeypatch.chdir(tmp_path)
    first = leave_native_checkpoint(synthetic_channel, [*wider_flags("16"), *outside_sagemaker_folders(tmp_path, "a")])
    # When a second run of another width starts from the same folder (output folders under `b`, no --checkpoint-dir):
    # resuming the first's checkpoint would be refused
    run_outside_sagemaker(synthetic_channel, tmp_path, "b", "24")
    # Then each kept its checkpoints under its own output folder (the second did not resume the first's)
    assert first == tmp_path / "a" / "output" / "checkpoints" and any(first.glob("step-*.pt"))
    assert any((tmp_path / "b" / "output" / "checkpoints").glob("step-*.pt"))
    assert not (tmp_path / "checkpoints").exists()
