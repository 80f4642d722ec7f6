"""`python -m ranker.predict` on a real job's model.tar.gz: the job's own test NDCG, one score per row, clear errors."""

from __future__ import annotations

import contextlib
import csv
import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from ranker.model.metrics import NDCG_CUTOFFS
from ranker.predict import main as predict_main
from sklearn.datasets import load_svmlight_file

from .short_job import NUM_FEATURES, code_env

pytestmark = pytest.mark.slow


def run_command(*args: str) -> subprocess.CompletedProcess:
    """`python -m ranker.predict ARGS` as a user runs it."""
    return subprocess.run([sys.executable, "-m", "ranker.predict", *args], capture_output=True, text=True,
                          env=code_env(), timeout=300)


def predict(*args: str) -> subprocess.CompletedProcess:
    """The same command's `main` in this process: its exit status and both streams, without a second of start-up
    (torch's import) for each case. The first test runs the command itself."""
    command = [sys.executable, "-m", "ranker.predict", *args]
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            predict_main(list(args))
            status = 0
        except SystemExit as exit_:
            status = exit_.code if isinstance(exit_.code, int) else 1
    return subprocess.CompletedProcess(command, status, stdout.getvalue(), stderr.getvalue())


def printed_ndcg(stdout: str) -> dict[str, float]:
    line = next(line for line in stdout.splitlines() if line.startswith("ndcg@"))
    return {name: float(value) for name, value in (pair.split("=") for pair in line.split()) if name != "queries"}


def read_scores(path: Path) -> list[dict[str, str]]:
    with path.open() as handle:
        return list(csv.DictReader(handle, delimiter="\t"))


def test_the_test_channel_scores_to_the_jobs_test_ndcg(trained_job, tmp_path):
    # When the job's model.tar.gz scores the job's test channel, with the command a user runs
    result = run_command("--model", str(trained_job.model_tar), "--input", str(trained_job.test_dir),
                     "--output", str(tmp_path / "scores.tsv"))
    # Then it prints the NDCG@k that the job measured on that channel (metrics.json)
    assert result.returncode == 0, result.stderr
    printed = printed_ndcg(result.stdout)
    for k in NDCG_CUTOFFS:
        assert printed[f"ndcg@{k}"] == pytest.approx(trained_job.metrics[f"test_ndcg@{k}"], abs=1e-4)
    assert "queries=40" in result.stdout


def test_one_score_per_row_in_file_order_as_the_torchscript_export_scores(trained_job, tmp_path):
    # When the unpacked model folder scores the test file
    data_file = trained_job.test_dir / "rank.train"
    result = predict("--model", str(trained_job.model_dir), "--input", str(data_file),
                     "--output", str(tmp_path / "scores.tsv"))
    assert result.returncode == 0, result.stderr
    # Then each data row has its score, equal to what the artifact's TorchScript file gives the same rows read by
    # scikit-learn's svmlight reader
    rows = read_scores(tmp_path / "scores.tsv")
    features, _ = load_svmlight_file(str(data_file), n_features=NUM_FEATURES, dtype=np.float32, zero_based=False)
    with torch.no_grad():
        expected = torch.jit.load(str(trained_job.model_dir / "model.pt"))(torch.from_numpy(features.toarray()))
    assert [row["row"] for row in rows] == [str(number) for number in range(1, features.shape[0] + 1)]
    np.testing.assert_allclose([float(row["score"]) for row in rows], expected.numpy(), atol=1e-6)


def test_rows_of_a_query_apart_keep_their_file_order_and_their_qid(trained_job, tmp_path):
    # Given rows whose queries interleave (qid 7, 9, 7)
    data_file = tmp_path / "rank.test"
    data_file.write_text("2 qid:7 1:0.5 2:3\n0 qid:9 1:0.1\n1 qid:7 3:12 4:0.2\n")
    # When scored to stdout
    result = predict("--model", str(trained_job.model_tar), "--input", str(data_file), "--output", "-")
    assert result.returncode == 0, result.stderr
    # Then the scores come in file order with their qids, and NDCG is measured over the two queries
    table = [line.split("\t") for line in result.stdout.splitlines()[1:]]
    assert [(row[1], row[2]) for row in table] == [("1", "7"), ("2", "9"), ("3", "7")]
    assert "queries=2" in result.stderr


def test_rows_without_queries_are_scored_and_ndcg_is_skipped_with_the_reason(trained_job, tmp_path):
    data_file = tmp_path / "unlabelled.txt"
    data_file.write_text("0 1:0.5 2:3\n0 1:0.1\n")
    result = predict("--model", str(trained_job.model_tar), "--input", str(data_file),
                     "--output", str(tmp_path / "scores.tsv"))
    assert result.returncode == 0, result.stderr
    assert len(read_scores(tmp_path / "scores.tsv")) == 2
    assert "NDCG: not computed" in result.stdout and "qid:" in result.stdout


@pytest.mark.parametrize(("text", "expected"), [
    (f"0 qid:1 {NUM_FEATURES + 3}:0.5\n", f"rows have {NUM_FEATURES + 3} features but the model was trained on "
                                          f"{NUM_FEATURES}"),
    ("0 qid:1 1:0.5\nnot a row\n", ":2: not a LETOR row"),
])
def test_bad_rows_are_refused_naming_the_file_and_the_fix(trained_job, tmp_path, text, expected):
    data_file = tmp_path / "rank.test"
    data_file.write_text(text)
    result = predict("--model", str(trained_job.model_tar), "--input", str(data_file))
    assert result.returncode == 2
    assert str(data_file) in result.stderr and expected in result.stderr


def test_a_model_path_that_is_no_artifact_is_refused(trained_job, tmp_path):
    (tmp_path / "model.tar.gz").write_text("not an archive")
    result = predict("--model", str(tmp_path / "model.tar.gz"), "--input", str(trained_job.test_dir))
    assert result.returncode == 2
    assert "model:" in result.stderr and "neither a model folder nor a model.tar.gz" in result.stderr


def test_an_input_folder_without_letor_files_is_refused(trained_job, tmp_path):
    result = predict("--model", str(trained_job.model_tar), "--input", str(tmp_path))
    assert result.returncode == 2
    assert f"input: {tmp_path}" in result.stderr
