"""The inference handler the artifact carries, loaded from the unpacked model.tar.gz as the SageMaker PyTorch
serving toolkit loads it (serve_like_toolkit.py), answers like the scoring command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_svmlight_file

from .short_job import NUM_FEATURES

pytestmark = pytest.mark.slow

SERVE_LIKE_TOOLKIT = Path(__file__).with_name("serve_like_toolkit.py")


def serve(model_tar: Path, folder: Path, requests: list[dict], python: str = sys.executable) -> dict:
    """Unpacks the artifact as the endpoint does (/opt/ml/model) and answers `requests` with only its code/ on the
    path."""
    model_dir = folder / "opt-ml-model"
    with tarfile.open(model_tar) as archive:
        archive.extractall(model_dir, filter="data")
    (folder / "requests.json").write_text(json.dumps(requests))
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTHON", "SM_", "VIRTUAL_ENV"))}
    result = subprocess.run([python, str(SERVE_LIKE_TOOLKIT), str(model_dir), str(folder / "requests.json")],
                            capture_output=True, text=True, cwd=folder, timeout=300,
                            env={**env, "PYTHONPATH": str(model_dir / "code"), "OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stderr[-4000:]
    answer = json.loads(result.stdout.splitlines()[-1])
    answer["model_dir"] = model_dir
    return answer


def command_scores(model_tar: Path, data_file: Path, folder: Path, python: str = sys.executable) -> np.ndarray:
    """What `python -m ranker.predict` writes for `data_file`, one float32 score per row."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTHON", "SM_"))}
    training_code = Path(__file__).resolve().parents[2] / "training_code"
    subprocess.run([python, "-m", "ranker.predict", "--model", str(model_tar), "--input", str(data_file),
                    "--output", str(folder / "scores.tsv")], check=True, capture_output=True, timeout=300,
                   env={**env, "PYTHONPATH": str(training_code), "OMP_NUM_THREADS": "1"})
    return written_scores(folder / "scores.tsv")


def written_scores(scores_tsv: Path, file_name: str | None = None) -> np.ndarray:
    """The score column of a scores.tsv the scoring command wrote (only `file_name`'s rows, when given)."""
    rows = [line.split("\t") for line in scores_tsv.read_text().splitlines()[1:]]
    return np.array([float(row[3]) for row in rows if file_name in (None, row[0])], np.float32)


def requests_for(data_file: Path) -> list[dict]:
    """The same rows as LETOR text (both text types) and as JSON instances (dense rows read by scikit-learn)."""
    text = data_file.read_text()
    features, _ = load_svmlight_file(str(data_file), n_features=NUM_FEATURES, zero_based=False)
    instances = {"instances": features.toarray().tolist()}
    return [
        {"content_type": "application/json", "body": json.dumps(instances)},
        {"content_type": "text/x-libsvm", "body": text, "accept": "*/*"},
        {"content_type": "text/plain", "body": text, "accept": "text/plain"},
        {"content_type": "application/json", "body": json.dumps({"instances": [[1.0] * (NUM_FEATURES + 1)]})},
        {"content_type": "application/json", "body": json.dumps({"instances": [[0.5, "high"]]})},
        {"content_type": "image/png", "body": "x"},
        {"content_type": "text/plain", "body": "1 qid:3 1:0.2\n1 qid:3 2:abc\n"},
    ]


def assert_serves_like_the_command(answer: dict, expected: np.ndarray) -> None:
    json_response, letor_response, text_response, too_wide, not_a_number, wrong_type, bad_row = answer["responses"]
    # JSON instances and LETOR text get the scoring command's scores, row for row
    np.testing.assert_array_equal(np.array(json.loads(json_response["body"])["scores"], np.float32), expected)
    np.testing.assert_array_equal(np.array(json.loads(letor_response["body"])["scores"], np.float32), expected)
    np.testing.assert_array_equal(np.array(text_response["body"].split(), dtype=np.float64).astype(np.float32),
                                  expected)
    # Bad requests are answered with errors naming the field, the value and the fix
    assert f"rows have {NUM_FEATURES + 1} features but the model was trained on {NUM_FEATURES}" in too_wide["error"]
    assert 'instances[0][1]: "high" is not a finite number' in not_a_number["error"]
    assert "Content-Type: 'image/png' is not accepted" in wrong_type["error"]
    assert "request body:2: not a LETOR row" in bad_row["error"]
    # And every module the handler ran came from the artifact's code/ folder
    code = str(answer["model_dir"] / "code")
    assert set(answer["modules"]) == {"inference", "ranker", "sagemaker_distributed"}
    assert all(path.startswith(code) for path in answer["modules"].values()), answer["modules"]


def test_the_handler_answers_json_and_letor_requests_with_the_scoring_commands_scores(trained_job, tmp_path):
    data_file = trained_job.test_dir / "rank.train"
    expected = command_scores(trained_job.model_tar, data_file, tmp_path)
    answer = serve(trained_job.model_tar, tmp_path, requests_for(data_file))
    assert_serves_like_the_command(answer, expected)
