"""A real short training job whose artifact the scoring tests use: train_ddp.py on one process, a train and a test
channel of synthetic LETOR text, log1p preprocessing on (so the artifact's preprocessing is exercised), and
model.tar.gz packed as SageMaker packs the model folder."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from local_mode.job_runtime.artifacts import tar_folder_contents

TRAINING_CODE = Path(__file__).resolve().parents[2] / "training_code"
NUM_FEATURES = 12
# Tiny and quick on a busy CPU; dropout stays on, so eval mode is what makes scoring deterministic.
FLAGS = ["--epochs", "3", "--batch-size", "8", "--width", "16", "--num-layers", "3", "--log1p", "true",
         "--log-every", "4"]


@dataclass(frozen=True)
class TrainedJob:
    model_tar: Path
    model_dir: Path
    test_dir: Path
    metrics: dict[str, float]


def write_channels(root: Path, python: str) -> tuple[Path, Path]:
    """Train (qid column) and test (group file) channels of synthetic LETOR text, written by the project's
    generator."""
    for name, queries, seed, extra in (("train", 96, 1, ["--qid"]), ("test", 40, 2, [])):
        subprocess.run([python, "-m", "ranker.data.synthetic", "--output", str(root / name), "--queries",
                        str(queries), "--docs-per-query", "10", "--features", str(NUM_FEATURES), "--seed", str(seed),
                        *extra], check=True, capture_output=True, env=code_env())
    return root / "train", root / "test"


def train_short_job(root: Path, python: str) -> TrainedJob:
    train, test = write_channels(root / "data", python)
    model_dir = root / "model"
    result = subprocess.run([python, str(TRAINING_CODE / "train_ddp.py"), "--train", str(train), "--test", str(test),
                             *FLAGS, "--model-dir", str(model_dir), "--output-data-dir", str(root / "output"),
                             "--checkpoint-dir", str(root / "checkpoints")],
                            capture_output=True, text=True, env=code_env(), timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    model_tar = tar_folder_contents(model_dir, root / "model.tar.gz")
    return TrainedJob(model_tar, model_dir, test, json.loads((model_dir / "metrics.json").read_text()))


def code_env(**extra: str) -> dict[str, str]:
    """The environment of a process that imports the training code as the container does (its root on the path)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("SM_", "PYTHON", "VIRTUAL_ENV"))}
    return {**env, "PYTHONPATH": str(TRAINING_CODE), "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1", **extra}
