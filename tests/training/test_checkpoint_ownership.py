"""Checkpoints belong to one run: outside SageMaker each run resumes from its own folder, and a checkpoint of another
model or data shape in the folder it is given is refused, naming --checkpoint-dir, instead of crashing in
`load_state_dict` or continuing someone else's training."""

from __future__ import annotations

import subprocess
import sys

import pytest

from training_launch import TINY_MODEL_FLAGS, TRAINING_CODE, run_dirs, run_script, script_env

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("script", ["train_ddp.py", "train_lightning.py"])
def test_a_checkpoint_of_another_model_is_refused_naming_the_flag(script, synthetic_channel, tmp_path):
    # Given a folder holding another run's checkpoint (width 16)
    dirs = run_dirs(tmp_path)
    run_script(script, ["--train", str(synthetic_channel), *TINY_MODEL_FLAGS, "--max-steps", "4",
                        "--checkpoint-every", "2", *dirs.flags()])
    assert any(dirs.checkpoint_dir.rglob("*.pt")) or any(dirs.checkpoint_dir.rglob("*.ckpt"))

    # When a run of another width is pointed at that folder
    wider = [flag if flag != "16" else "24" for flag in TINY_MODEL_FLAGS]
    result = subprocess.run([sys.executable, script, "--train", str(synthetic_channel), *wider, "--max-steps", "4",
                             *dirs.flags()], env=script_env(), cwd=TRAINING_CODE, capture_output=True, text=True,
                            timeout=180)

    # Then it stops with one line that names the folder's flag and what to do, and trains nothing
    assert result.returncode == 2, result.stderr[-3000:]
    [line] = [text for text in result.stderr.splitlines() if text.startswith("error:")]
    assert line.startswith("error: checkpoint_dir: ") and "another model or data shape" in line
    assert "pass --checkpoint-dir" in line
    assert "Traceback" not in result.stderr


def test_outside_sagemaker_two_runs_in_one_folder_do_not_share_checkpoints(synthetic_channel, tmp_path):
    # Given two runs from the same working folder with different output folders and no --checkpoint-dir
    for name, width in (("a", "16"), ("b", "24")):
        flags = [flag if flag != "16" else width for flag in TINY_MODEL_FLAGS]
        subprocess.run([sys.executable, str(TRAINING_CODE / "train_ddp.py"), "--train", str(synthetic_channel),
                        *flags, "--max-steps", "4", "--checkpoint-every", "2", "--model-dir", str(tmp_path / name / "model"),
                        "--output-data-dir", str(tmp_path / name / "output")], env=script_env(), cwd=tmp_path,
                       check=True, capture_output=True, timeout=180)
    # Then each kept its checkpoints under its own output folder (the second did not resume the first's)
    assert any((tmp_path / "a" / "output" / "checkpoints").glob("step-*.pt"))
    assert any((tmp_path / "b" / "output" / "checkpoints").glob("step-*.pt"))
    assert not (tmp_path / "checkpoints").exists()
