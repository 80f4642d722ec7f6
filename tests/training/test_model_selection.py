"""What a run exports: the weights with the best validation NDCG@10 (named in metrics.json), with the input
preprocessing inside the artifact, so raw LETOR rows score through it exactly as the trainer measured."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from ranker.data import synthetic, synthetic_search
from ranker.log_format import parse_metrics
from ranker.model.export import load_scorer
from sklearn.datasets import load_svmlight_file
from sklearn.metrics import ndcg_score
from training_launch import run_dirs, run_script

pytestmark = pytest.mark.slow

SCRIPTS = ["train_ddp.py", "train_lightning.py"]
SMALL_MODEL = ["--width", "16", "--num-layers", "3", "--bins", "4", "--log-every", "4"]
# Few queries, no dropout, a high learning rate: validation NDCG peaks and falls again within the run.
OVERFITTING = [*SMALL_MODEL, "--dropout", "0", "--learning-rate", "0.01", "--batch-size", "4"]


@pytest.fixture(scope="module")
def search_channels(tmp_path_factory):
    """Search-like training and test files: raw counts far above 1, flags, LETOR text with qid columns."""
    folder = tmp_path_factory.mktemp("search")
    train = synthetic.write_letor(synthetic_search.generate(48, 12, 10, seed=0), folder, with_qid=True)
    test = synthetic.write_letor(synthetic_search.generate(20, 12, 10, seed=1), folder, with_qid=True,
                                 name="rank.test")
    return train, test


def sklearn_ndcg_at_10(path, scores: np.ndarray) -> float:
    """Mean NDCG@10 over the file's queries, each scored by scikit-learn (0 for a query without relevant documents,
    as scikit-learn and the trainers define it)."""
    _, labels, query_ids = load_svmlight_file(str(path), query_id=True)
    values = []
    for query in np.unique(query_ids):
        rows = query_ids == query
        values.append(ndcg_score(labels[rows][None], scores[rows][None], k=10) if labels[rows].any() else 0.0)
    return float(np.mean(values))


@pytest.mark.parametrize("script", SCRIPTS)
def test_raw_letor_rows_score_through_the_loaded_artifact_to_the_trainers_own_test_ndcg(tmp_path, search_channels,
                                                                                        script):
    # Given a run with log1p and the piecewise-linear encoding, trained on raw search-like text
    train, test = search_channels
    dirs = run_dirs(tmp_path)
    run_script(script, ["--train", str(train), "--test", str(test), "--epochs", "3", "--log1p", "true",
                        *SMALL_MODEL, *dirs.flags()])
    metrics = json.loads((dirs.model_dir / "metrics.json").read_text())
    # When the test file's raw rows, read by scikit-learn, are scored by the loaded artifact and its TorchScript export
    features, _ = load_svmlight_file(str(test), n_features=10)
    raw = torch.from_numpy(features.toarray().astype(np.float32))
    with torch.no_grad():
        scores = load_scorer(dirs.model_dir)(raw)
    torchscript = torch.jit.load(str(dirs.model_dir / "model.pt"))(raw)
    # Then scikit-learn's NDCG@10 of those scores is the trainer's own test NDCG@10, and both exports agree
    assert sklearn_ndcg_at_10(test, scores.numpy()) == pytest.approx(metrics["test_ndcg@10"], abs=1e-5)
    torch.testing.assert_close(torchscript, scores)
    # And the artifact's config says which preprocessing the scorer applies
    config = json.loads((dirs.model_dir / "model_config.json").read_text())
    assert (config["log1p"], config["encoding"], config["bins"]) == (True, "piecewise", 4)


def validation_lines(stdout: str) -> list[dict[str, float]]:
    """Every metric line with val_ndcg@10 the run printed (each epoch's validation, then the final line)."""
    return [found for found in map(parse_metrics, stdout.splitlines()) if "val_ndcg@10" in found]


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_run_twice_as_long_exports_a_model_no_worse_on_validation(tmp_path, search_channels, script):
    train, _ = search_channels
    exported, logged = {}, {}
    # Given the same run for 6 epochs and for 12 (its learning-rate schedule stretched over the longer run)
    for epochs in (6, 12):
        dirs = run_dirs(tmp_path / str(epochs))
        result = run_script(script, ["--train", str(train), "--epochs", str(epochs), *OVERFITTING, *dirs.flags()])
        exported[epochs] = json.loads((dirs.model_dir / "metrics.json").read_text())
        logged[epochs] = validation_lines(result.stdout)
    # Then the longer run's exported model is at least as good on validation as the shorter one's
    assert exported[12]["val_ndcg@10"] >= exported[6]["val_ndcg@10"]
    for epochs in (6, 12):
        # And each export is at least as good as every epoch the run validated, and names its epoch and step
        assert exported[epochs]["val_ndcg@10"] >= max(line["val_ndcg@10"] for line in logged[epochs]) - 1e-6
        steps_per_epoch = logged[epochs][0]["step"]  # the first validation comes after one epoch
        assert 1 <= exported[epochs]["exported_epoch"] <= epochs
        assert exported[epochs]["exported_step"] == steps_per_epoch * exported[epochs]["exported_epoch"]
    # And in the long run the best epoch is not the last (so exporting the last weights would have been worse)
    assert exported[12]["exported_epoch"] < 12
