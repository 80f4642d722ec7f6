"""Checkpoints belong to one run: outside SageMaker each run resumes from its own folder, and a checkpoint of another
model or data shape in the folder it is given is refused, naming --checkpoint-dir, instead of crashing in
`load_state_dict` or continuing someone else's training."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from training_launch import TINY_MODEL_FLAGS, TRAINING_CODE, run_dirs, script_env

pytestmark = pytest.mark.slow


def wider_flags(width: str) -> list[str]:
    return [flag if flag != "16" else width for flag in TINY_MODEL_FLAGS]


def run_outside_sagemaker(channel: Path, working_folder: Path, name: str, width: str) -> None:
    """train_ddp.py from `working_folder` with output folders under `name` and no --checkpoint-dir."""
    subprocess.run([sys.executable, str(TRAINING_CODE / "train_ddp.py"), "--train", str(channel), *wider_flags(width),
                    "--max-steps", "4", "--checkpoint-every", "2", "--model-dir", str(working_folder / name / "model"),
                    "--output-data-dir", str(working_folder / name / "output")], env=script_env(), cwd=working_folder,
                   check=True, capture_output=True, timeout=180)


@pytest.fixture(scope="module")
def first_run_outside_sagemaker(tmp_path_factory, synthetic_channel) -> Path:
    """The working folder of a width-16 native run that checkpointed every 2 of its 4 steps, in folder `a`."""
    working_folder = tmp_path_factory.mktemp("outside-sagemaker")
    run_outside_sagemaker(synthetic_channel, working_folder, "a", "16")
    return working_folder


@pytest.fixture
def width_16_checkpoints(request, script) -> Path:
    """A checkpoint folder another width-16 run of `script` wrote: the native one of the run outside SageMaker, and
    the Lightning one of the session's two-rank run (its checkpoint keeps the model's shapes whatever the ranks)."""
    if script == "train_ddp.py":
        return request.getfixturevalue("first_run_outside_sagemaker") / "a" / "output" / "checkpoints"
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


def test_outside_sagemaker_two_runs_in_one_folder_do_not_share_checkpoints(synthetic_channel,
                                                                           first_run_outside_sagemaker):
    # Given two runs from the same working folder with different output folders and no --checkpoint-dir (the second
    # of another width: resuming the first's checkpoint would be refused)
    working_folder = first_run_outside_sagemaker
    run_outside_sagemaker(synthetic_channel, working_folder, "b", "24")
    # Then each kept its checkpoints under its own output folder (the second did not resume the first's)
    assert any((working_folder / "a" / "output" / "checkpoints").glob("step-*.pt"))
    assert any((working_folder / "b" / "output" / "checkpoints").glob("step-*.pt"))
    assert not (working_folder / "checkpoints").exists()
