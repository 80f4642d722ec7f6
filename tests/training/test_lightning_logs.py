"""What a user of train_lightning.py sees and keeps: a log without warnings, advertisements or Lightning's status lines,
the model summed up in one line, the training path and metric lines numbered like train_ddp.py's, the same timeline of
phases, and a `.ckpt` that rebuilds the model on its own."""

from __future__ import annotations

import logging
import re
import warnings

import pytest
import torch
from ranker.data.channels import load_channel
from ranker.lightning.module import RankingModule
from ranker.log_format import parse_metrics
from ranker.model.export import load_scorer
from ranker.training import timeline
from sagemaker_distributed.lightning.console import LIGHTNING_INFO_LOGGER, quiet_lightning_console

# A Python warning as printed: `path/to/module.py:LINE: [Category: ]message`.
WARNING_LINE = re.compile(r"\.py:\d+: ")
ADVERTISEMENT = re.compile(r"Tip:|litlogger|litmodels|lightning\.ai", re.IGNORECASE)


def metric_lines(output: str) -> list[dict[str, float]]:
    return [metrics for metrics in map(parse_metrics, output.splitlines()) if metrics]


@pytest.mark.slow
def test_a_two_rank_lightning_run_prints_no_warning_and_no_advertisement(two_rank_runs):
    _, result = two_rank_runs["train_lightning.py"]
    log = (result.stdout + result.stderr).splitlines()
    assert [line for line in log if WARNING_LINE.search(line) or "Warning" in line] == []
    assert [line for line in log if ADVERTISEMENT.search(line)] == []


@pytest.mark.slow
def test_a_lightning_run_sums_its_model_up_in_one_line_and_names_its_training_path_as_the_native_one_does(
        two_rank_runs):
    lightning = two_rank_runs["train_lightning.py"][1].stdout.splitlines()
    native = two_rank_runs["train_ddp.py"][1].stdout.splitlines()
    # Then no per-layer table, no device census (GPU, TPU) and no other status line of Lightning's
    assert [line for line in lightning if re.search(r"[┃│┏└]|params|[GT]PU available|`train_dataloader`", line)] == []
    # And one line gives the model's size and its FLOPs for one document, counted rather than zero
    sizes = [line for line in lightning if line.startswith("model: ")]
    assert len(sizes) == 1 and re.fullmatch(r"model: [0-9.]+ [KM]? ?parameters \([0-9.]+ MB\), [1-9][0-9.]* [KM]? ?"
                                            r"FLOPs per document", sizes[0]), sizes
    # And the training path, which says what ran where, is the native entry point's line
    path = [line for line in native if line.startswith("training path on ")]
    assert len(path) == 1 and [line for line in lightning if line.startswith("training path on ")] == path


@pytest.mark.slow
def test_both_trainers_number_every_metric_line_alike(two_rank_runs):
    native = metric_lines(two_rank_runs["train_ddp.py"][1].stdout)
    lightning = metric_lines(two_rank_runs["train_lightning.py"][1].stdout)
    # Then every line has the same epoch, step and metric names in both, the first epoch's validation saying epoch=1
    # (the final line, the exported weights' metrics, names no epoch or step)
    assert [(line.get("epoch"), line.get("step"), sorted(line)) for line in lightning] == \
           [(line.get("epoch"), line.get("step"), sorted(line)) for line in native]
    assert next(line for line in lightning if "val_ndcg@10" in line)["epoch"] == 1
    # And the validation metrics, reduced over both ranks, agree too
    for ours, theirs in zip(lightning, native):
        for name in (name for name in ours if name.startswith("val_")):
            assert ours[name] == pytest.approx(theirs[name], abs=1e-5), name


@pytest.mark.slow
def test_both_trainers_mark_every_phase_of_the_timeline_in_order(two_rank_runs):
    for entry_point in ("train_ddp.py", "train_lightning.py"):
        marks = timeline.read(two_rank_runs[entry_point][1].stdout)
        assert list(marks) == list(timeline.PHASES), entry_point
        assert list(marks.values()) == sorted(marks.values()), entry_point


@pytest.mark.slow
def test_the_checkpoint_alone_rebuilds_the_model_and_scores_a_batch(two_rank_runs, synthetic_channel):
    dirs, _ = two_rank_runs["train_lightning.py"]
    # When the .ckpt is loaded with nothing else, under weights_only loading (torch's default from 2.6)
    module = RankingModule.load_from_checkpoint(dirs.checkpoint_dir / "last.ckpt", map_location="cpu",
                                                weights_only=True).eval()
    # Then it is the trained model: the same scores as the exported scorer of the same run
    features = torch.from_numpy(load_channel(synthetic_channel).features[:20])
    with torch.no_grad():
        scores = module(features.unsqueeze(0)).squeeze(0)
    assert scores.shape == (20,) and torch.isfinite(scores).all()
    torch.testing.assert_close(scores, load_scorer(dirs.model_dir)(features))
    assert module.model_config.width == 16 and module.train_config.loss == "pointwise"


def test_the_quiet_console_drops_lightnings_tips_and_passes_its_other_lines(caplog):
    quiet_lightning_console()
    logger = logging.getLogger(LIGHTNING_INFO_LOGGER)
    with caplog.at_level(logging.INFO, logger=LIGHTNING_INFO_LOGGER):
        logger.info("💡 Tip: For seamless cloud logging and experiment tracking, try installing [litlogger]")
        logger.info("GPU available: False, used: False")
    assert [record.getMessage() for record in caplog.records] == ["GPU available: False, used: False"]


def test_the_quiet_console_ignores_the_leafspec_warning_from_lightning_only():
    message = "`isinstance(treespec, LeafSpec)` is deprecated, use `isinstance(treespec, TreeSpec)` instead."
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        quiet_lightning_console()
        for module in ("lightning.pytorch.utilities._pytree", "ranker.data.batches"):
            warnings.warn_explicit(message, FutureWarning, "file.py", 1, module=module)
        warnings.warn_explicit("another deprecation", FutureWarning, "file.py", 1,
                               module="lightning.pytorch.utilities._pytree")
    assert [(str(w.message), w.category) for w in caught] == [(message, FutureWarning),
                                                               ("another deprecation", FutureWarning)]
