"""What a run exports: the weights with the best validation NDCG@10 (named in metrics.json), with the input
preprocessing inside the artifact, so raw LETOR rows score through it exactly as the trainer measured."""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest
import torch
from ranker.data import synthetic, synthetic_search
from ranker.log_format import parse_metrics
from ranker.model.export import load_scorer
from ranker.training import plots
from sklearn.datasets import load_svmlight_file
from sklearn.metrics import ndcg_score
from training_launch import NO_PORTABLE_EXPORT, run_dirs, run_script

pytestmark = pytest.mark.slow

SCRIPTS = ["train_ddp.py", "train_lightning.py"]
SMALL_MODEL = ["--width", "16", "--num-layers", "3", "--bins", "4", "--log-every", "4", *NO_PORTABLE_EXPORT]
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


def validation_lines(stdout: str) -> list[dict[str, float]]:
    """Every metric line with val_ndcg@10 the run printed (each epoch's validation, then the final line)."""
    return [found for found in map(parse_metrics, stdout.splitlines()) if "val_ndcg@10" in found]


# The learning rate at its peak from the first step, a tenth of it after every validation without a better NDCG@10:
# the capped run trains the early-stopped run's first epochs, and a resumed run that lost the schedule's state would
# train on at another rate.
SCHEDULE = ["--warmup-fraction", "0", "--lr-decay-patience", "1", "--lr-decay-factor", "0.1"]
STOPS_EARLY = ["--epochs", "30", "--early-stopping", "3", *SCHEDULE, *OVERFITTING]
CAPPED = ["--epochs", "2", "--early-stopping", "5", *SCHEDULE, *OVERFITTING]


def search_flags(search_channels) -> list[str]:
    """The search-like channels, raw counts through log1p, the test file scored with the exported weights."""
    train, test = search_channels
    return ["--train", str(train), "--test", str(test), "--log1p", "true"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory, search_channels) -> dict[tuple[str, str], tuple]:
    """Each script's run that the 2-epoch cap ends and its run that early stopping ends (checkpointing at every epoch's
    end, for the resume tests): (directories, stdout) by (script, "capped" or "stops early")."""
    results = {}

    def run(script: str, name: str, flags: list[str]) -> None:
        dirs = run_dirs(tmp_path_factory.mktemp(f"{script}-{name.replace(' ', '-')}"))
        results[script, name] = dirs, run_script(script, [*search_flags(search_channels), *flags,
                                                          *dirs.flags()]).stdout

    for script in SCRIPTS:
        run(script, "capped", CAPPED)
        steps_per_epoch = int(validation_lines(results[script, "capped"][1])[0]["step"])
        run(script, "stops early", [*STOPS_EARLY, "--checkpoint-every", str(steps_per_epoch)])
    return results


@pytest.mark.parametrize("script", SCRIPTS)
def test_raw_letor_rows_score_through_the_loaded_artifact_to_the_trainers_own_test_ndcg(runs, search_channels, script):
    # Given a run with log1p and the piecewise-linear encoding, trained on raw search-like text (the capped run: what
    # it trains does not matter here, only that its metrics.json scores the weights it exported)
    _, test = search_channels
    dirs, _ = runs[script, "capped"]
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


def epoch_validations(stdout: str) -> list[dict[str, float]]:
    """Each epoch's validation line (the final line, which scores the exported weights again, left out)."""
    return validation_lines(stdout)[:-1]


def epoch_lines(stdout: str) -> list[dict[str, float]]:
    """The validation lines that name an epoch."""
    return [line for line in validation_lines(stdout) if "epoch" in line]


def each_epochs_validation(stdout: str) -> list[dict[str, float]]:
    """The first validation line naming each epoch, in order: the epoch's own validation."""
    first: dict[float, dict[str, float]] = {}
    for line in epoch_lines(stdout):
        first.setdefault(line["epoch"], line)
    return list(first.values())


def exported(dirs) -> dict[str, float]:
    return json.loads((dirs.model_dir / "metrics.json").read_text())


@pytest.mark.parametrize("script", SCRIPTS)
def test_early_stopping_ends_a_patience_after_the_best_validation_and_exports_it(runs, script):
    # Given a run allowed 30 epochs that stops after 3 validations in a row without a better NDCG@10
    dirs, stdout = runs[script, "stops early"]
    scores = [line["val_ndcg@10"] for line in epoch_validations(stdout)]
    best_epoch = scores.index(max(scores)) + 1
    # Then it stopped exactly 3 validations after the first epoch no later one beat, well before the cap
    assert len(scores) == best_epoch + 3 < 30
    # And it exported that epoch's weights, named by epoch and step
    steps_per_epoch = epoch_validations(stdout)[0]["step"]  # the first validation comes after one epoch
    assert (exported(dirs)["exported_epoch"], exported(dirs)["exported_step"]) == (best_epoch,
                                                                                   best_epoch * steps_per_epoch)
    assert exported(dirs)["val_ndcg@10"] == pytest.approx(max(scores), abs=1e-6)


@pytest.mark.parametrize("script", SCRIPTS)
def test_early_stopping_says_when_it_ends_a_run_and_the_last_epochs_line_holds_that_epochs_metrics(runs, script):
    # Given a run that early stopping ended a patience after its best epoch
    dirs, stdout = runs[script, "stops early"]
    lines = epoch_lines(stdout)
    best_epoch = exported(dirs)["exported_epoch"]
    # Then every epoch's validation has one line, under its own epoch: the last one is the epoch it stopped at, not
    # the best epoch's metrics again under the last epoch's name
    assert [line["epoch"] for line in lines] == list(range(1, len(lines) + 1))
    assert lines[best_epoch - 1]["val_ndcg@10"] == pytest.approx(exported(dirs)["val_ndcg@10"], rel=1e-5)
    assert all(line["val_ndcg@10"] <= lines[best_epoch - 1]["val_ndcg@10"] for line in lines[best_epoch:])
    # And one line says that early stopping ended the run, at which epoch, the best epoch and its NDCG@10, and that the
    # model exported is that epoch's
    said = [line for line in stdout.splitlines() if line.startswith("early stopping")]
    assert len(said) == 1, stdout
    stopped = re.fullmatch(r"early stopping after epoch (\d+): no better val_ndcg@10 than epoch (\d+)'s ([0-9.]+) in 3 "
                           r"validations; the model exported is epoch (\d+)'s", said[0])
    assert stopped, said[0]
    assert int(stopped[1]) == lines[-1]["epoch"]
    assert int(stopped[2]) == int(stopped[4]) == best_epoch
    assert float(stopped[3]) == pytest.approx(exported(dirs)["val_ndcg@10"], rel=1e-5)


@pytest.mark.parametrize("script", SCRIPTS)
def test_the_plots_draw_the_whole_run_and_mark_the_exported_epoch_when_the_best_epoch_is_not_the_last(runs, script):
    # Given a run whose best epoch came a patience before its last
    dirs, stdout = runs[script, "stops early"]
    lines = each_epochs_validation(stdout)
    # When its curves are built from what the plots were drawn from
    drawn = json.loads((dirs.output_dir / "history.json").read_text())
    ndcg = {name: (steps, values) for name, steps, values in plots.curves(drawn["history"], ("val_ndcg@",),
                                                                          drawn["final_metrics"])}
    loss = {name: steps for name, steps, _ in plots.curves(drawn["history"], ("train_loss", "val_loss"),
                                                            drawn["final_metrics"])}
    # Then the NDCG@10 curve has every epoch's validation, each at its step with its own value, up to the last epoch
    steps, values = ndcg["val_ndcg@10"]
    assert steps == [line["step"] for line in lines]
    assert values == pytest.approx([line["val_ndcg@10"] for line in lines], rel=1e-5)
    # And the validation loss too
    assert loss["val_loss"] == steps
    # And the exported epoch is marked at its step
    assert plots.exported_mark(drawn["final_metrics"]) == (exported(dirs)["exported_step"],
                                                           f"exported: epoch {exported(dirs)['exported_epoch']}")


@pytest.mark.parametrize("script", SCRIPTS)
def test_the_epoch_cap_ends_a_run_whose_patience_is_not_spent(runs, script):
    # Given a run allowed 2 epochs with a patience of 5
    dirs, stdout = runs[script, "capped"]
    # Then it trained exactly 2 epochs' steps, and exported the better of its two epochs
    lines = [found for found in map(parse_metrics, stdout.splitlines()) if "step" in found]
    steps_per_epoch = validation_lines(stdout)[0]["step"]
    assert max(line["step"] for line in lines) == 2 * steps_per_epoch
    assert exported(dirs)["val_ndcg@10"] >= max(line["val_ndcg@10"] for line in validation_lines(stdout)) - 1e-6
    assert exported(dirs)["exported_step"] == steps_per_epoch * exported(dirs)["exported_epoch"]
    # And the run that went on until early stopping exported a model no worse on validation
    assert exported(runs[script, "stops early"][0])["val_ndcg@10"] >= exported(dirs)["val_ndcg@10"]


def learning_rates(stdout: str) -> dict[int, float]:
    """The learning rate each training metric line reports, by step."""
    return {int(found["step"]): found["learning_rate"] for found in map(parse_metrics, stdout.splitlines())
            if "learning_rate" in found}


@pytest.mark.parametrize("script", SCRIPTS)
def test_the_learning_rate_drops_after_each_stalled_validation_and_not_before(runs, script):
    # Given a run at a peak rate of 0.01 from its first step, whose rate decays tenfold after every validation that is
    # not better than the best so far (and which stops after 3 in a row)
    dirs, stdout = runs[script, "stops early"]
    rates = learning_rates(stdout)
    # Then every step up to the first stalled validation ran at the peak, and each stall divided the rate by ten for
    # the steps after it (the run overfits: validation stalls within the run)
    best, decays, start = float("-inf"), 0, 0
    for line in epoch_validations(stdout):
        logged = [rate for step, rate in rates.items() if start < step <= line["step"]]
        assert logged and all(rate == pytest.approx(0.01 * 0.1**decays) for rate in logged), (start, rates)
        decays_before_last = decays
        decays += line["val_ndcg@10"] <= best
        best, start = max(best, line["val_ndcg@10"]), line["step"]
    assert decays >= 3
    if script == "train_lightning.py":
        # And Lightning's checkpoint of the last step (before its validation) holds the schedule's state, what a
        # resumed run continues from
        saved = torch.load(dirs.checkpoint_dir / "last.ckpt", map_location="cpu", weights_only=True)
        assert saved["lr_schedulers"][0]["decays"] == decays_before_last


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_step_cap_before_the_first_validation_exports_the_last_weights(tmp_path, search_channels, script):
    # Given a run with early stopping on that --max-steps ends within its first epoch, before any validation
    train, _ = search_channels
    dirs = run_dirs(tmp_path)
    result = run_script(script, ["--train", str(train), "--max-steps", "3", "--early-stopping", "5", *OVERFITTING,
                                 *dirs.flags()])
    # Then it exports the weights it ended with, validated once, at the end
    assert (exported(dirs)["exported_epoch"], exported(dirs)["exported_step"]) == (0, 3)
    assert exported(dirs)["val_ndcg@10"] == pytest.approx(validation_lines(result.stdout)[-1]["val_ndcg@10"],
                                                          abs=1e-6)


def test_a_native_run_resumed_at_an_epoch_end_stops_and_exports_as_the_uninterrupted_run(tmp_path, runs,
                                                                                         search_channels):
    # Given a run checkpointing at every epoch's end, which stopped early
    uninterrupted, stdout = runs["train_ddp.py", "stops early"]
    validations = epoch_validations(stdout)
    steps_per_epoch, last_step = int(validations[0]["step"]), int(validations[-1]["step"])
    # When it runs again from the checkpoint one epoch before it stopped (as if killed after writing it)
    previous = f"step-{last_step - steps_per_epoch:09d}.pt"
    dirs = run_dirs(tmp_path)
    dirs.checkpoint_dir.mkdir(parents=True)
    shutil.copy(uninterrupted.checkpoint_dir / previous, dirs.checkpoint_dir / previous)
    result = run_script("train_ddp.py", [*search_flags(search_channels), *STOPS_EARLY, "--checkpoint-every",
                                         str(steps_per_epoch), *dirs.flags()])
    # Then it resumed there, with that epoch's validation in its patience, best weights and learning-rate schedule: it
    # trains its last epoch at the uninterrupted run's decayed rate, stops at the same step and exports the same
    # weights
    assert f"resumed from {dirs.checkpoint_dir / previous}" in result.stdout
    resumed_rates = learning_rates(result.stdout)
    assert resumed_rates == {step: rate for step, rate in learning_rates(stdout).items() if step in resumed_rates}
    assert max(resumed_rates.values()) < 0.01
    assert exported(dirs) == exported(uninterrupted)
