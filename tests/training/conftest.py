"""Fixtures for the training tests."""

from __future__ import annotations

import fcntl
import os
import subprocess
from pathlib import Path

import pytest
from training_launch import (
    ENTRY_POINTS,
    TRACKED_EXPERIMENT,
    TRACKED_OUTPUT_PATH,
    TWO_RANKS,
    RunDirs,
    run_dirs,
    run_script,
    tracked_job_name,
)


@pytest.fixture(scope="session")
def synthetic_channel(tmp_path_factory) -> Path:
    """64 queries x 8 documents x 12 features, LETOR text with a group file."""
    from ranker.data.synthetic import generate, write_letor

    folder = tmp_path_factory.mktemp("synthetic")
    write_letor(generate(num_queries=64, docs_per_query=8, num_features=12, seed=3), folder)
    return folder


@pytest.fixture(scope="session")
def two_rank_runs(tmp_path_factory, synthetic_channel) -> dict[str, tuple[RunDirs, subprocess.CompletedProcess]]:
    """Both entry points on the synthetic channel with TWO_RANKS' flags, 2 gloo ranks each under torchrun, by script,
    each a tracked job logging to a local MLflow store (`tracked_job_environment`).

    Several test files read these runs (none writes to them): a test session runs them once. Under pytest-xdist the
    first worker to ask runs them in the folder its workers share while the others wait on a file lock, then read
    its folders and output (the synthetic channel is the same in every worker: generated from one seed).
    """
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent
    folder = shared / "two-rank-runs"
    with (shared / "two-rank-runs.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / "complete").is_file():
            for script in ENTRY_POINTS:
                dirs = run_dirs(folder / script)
                # Every artifact, model.pt2 included (TWO_RANKS leaves it out)
                result = run_script(script, ["--train", str(synthetic_channel), *TWO_RANKS, "--portable-export",
                                             "true", *dirs.flags()], nproc=2, **tracked_job_environment(folder, script))
                (folder / script / "stdout.txt").write_text(result.stdout)
                (folder / script / "stderr.txt").write_text(result.stderr)
            (folder / "complete").touch()
    return {script: _finished_run(folder / script, script) for script in ENTRY_POINTS}


def tracked_job_environment(folder: Path, script: str) -> dict[str, str]:
    """What the trigger gives a tracked job (MLflow's variables, the job's S3 output path) and SageMaker its name,
    with a SQLite store in `folder` standing in for the managed tracking server."""
    return {"MLFLOW_TRACKING_URI": f"sqlite:///{folder / 'mlflow.db'}", "MLFLOW_EXPERIMENT_NAME": TRACKED_EXPERIMENT,
            "TRAINING_JOB_NAME": tracked_job_name(script), "MODEL_S3_OUTPUT_PATH": TRACKED_OUTPUT_PATH}


def _finished_run(folder: Path, script: str) -> tuple[RunDirs, subprocess.CompletedProcess]:
    stdout, stderr = (folder / "stdout.txt").read_text(), (folder / "stderr.txt").read_text()
    return run_dirs(folder), subprocess.CompletedProcess(script, 0, stdout, stderr)
