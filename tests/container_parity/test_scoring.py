"""In each container environment: a job trained there leaves an artifact that the scoring command, the inference
handler (loaded as the serving toolkit loads it) and torch.export's loader all score with."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from serving.short_job import TrainedJob, code_env, train_short_job
from serving.test_handler import (
    assert_serves_like_the_command,
    command_scores,
    requests_for,
    serve,
    written_scores,
)

pytestmark = pytest.mark.slow

PORTABLE_MATCHES_TRAINED = """
import sys, torch
from ranker.data.channels import load_channel
from ranker.model.export import load_scorer
from ranker.model.portable import load_exported_program
features = torch.from_numpy(load_channel(sys.argv[2]).features)
with torch.no_grad():
    gap = (load_exported_program(sys.argv[1])(features) - load_scorer(sys.argv[1])(features)).abs().max().item()
print(gap)
"""


@pytest.fixture(scope="module")
def job_in_container(profile_env, tmp_path_factory) -> tuple[str, TrainedJob]:
    profile, env = profile_env
    return str(env.python), train_short_job(tmp_path_factory.mktemp(f"job-{profile.name}"), str(env.python))


@pytest.fixture(scope="module")
def scored_in_container(job_in_container, tmp_path_factory) -> tuple[subprocess.CompletedProcess, np.ndarray]:
    """The scoring command run once in the container on the job's test channel: what it printed, and its scores of
    the channel's rank.train. The test of its NDCG and the handler's comparison with it read the one run."""
    python, job = job_in_container
    scores_file = tmp_path_factory.mktemp("scores") / "scores.tsv"
    result = subprocess.run([python, "-m", "ranker.predict", "--model", str(job.model_tar), "--input",
                             str(job.test_dir), "--output", str(scores_file)],
                            capture_output=True, text=True, env=code_env(), timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    return result, written_scores(scores_file, "rank.train")


def test_the_scoring_command_prints_the_jobs_test_ndcg(job_in_container, scored_in_container):
    _, job = job_in_container
    result, _ = scored_in_container
    printed = dict(pair.split("=") for pair in result.stdout.splitlines()[-1].split())
    assert float(printed["ndcg@10"]) == pytest.approx(job.metrics["test_ndcg@10"], abs=1e-4)


def test_the_handler_serves_like_the_scoring_command(job_in_container, scored_in_container, tmp_path):
    python, job = job_in_container
    data_file = job.test_dir / "rank.train"
    _, expected = scored_in_container
    assert expected.size == len(data_file.read_text().splitlines())
    assert_serves_like_the_command(serve(job.model_tar, tmp_path, requests_for(data_file), python), expected)


@pytest.fixture(scope="module")
def job_in_project_env(tmp_path_factory) -> TrainedJob:
    """A job trained with the project's newer torch, for serving in an older container."""
    return train_short_job(tmp_path_factory.mktemp("job-project-env"), sys.executable)


@pytest.fixture(scope="module")
def project_env_scores(job_in_project_env, tmp_path_factory) -> np.ndarray:
    """The scoring command's scores of that job's test rows, in the project's environment: the same for every
    container, so computed once."""
    data_file = job_in_project_env.test_dir / "rank.train"
    return command_scores(job_in_project_env.model_tar, data_file, tmp_path_factory.mktemp("project-env-scores"))


def test_the_handler_serves_a_model_another_torch_trained(profile_env, job_in_project_env, project_env_scores,
                                                          tmp_path):
    # Given a model trained with the project's torch, scored by the command there
    _, env = profile_env
    data_file = job_in_project_env.test_dir / "rank.train"
    # Then the container's torch serves it with the same scores: the handler rebuilds the scorer from the weights
    answer = serve(job_in_project_env.model_tar, tmp_path, requests_for(data_file), str(env.python))
    assert_serves_like_the_command(answer, project_env_scores)


def test_the_exported_program_scores_like_the_trained_model(job_in_container):
    python, job = job_in_container
    result = subprocess.run([python, "-c", PORTABLE_MATCHES_TRAINED, str(job.model_dir), str(job.test_dir)],
                            capture_output=True, text=True, env=code_env(), timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    assert float(result.stdout.split()[-1]) <= 1e-5
