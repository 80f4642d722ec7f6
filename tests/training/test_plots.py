"""The curves the plots draw: every line the run logged, NDCG cutoffs in numeric order, and the exported step
marked."""

from __future__ import annotations

import json

import pytest
from ranker.training.plots import curves, exported_mark, plot_curves, start_plotting

# What a run's history holds (ranker.native.bookkeeping): training lines every few steps, validation at every epoch's
# end, the last one's included; the exported weights' metrics go to metrics.json, not to the history. Here the best
# epoch is the first, not the last.
HISTORY = [
    {"epoch": 0, "step": 4, "train_loss": 1.9, "learning_rate": 1e-3},
    {"epoch": 1, "step": 8, "train_loss": 1.7, "learning_rate": 9e-4},
    {"epoch": 1, "step": 8, "val_loss": 1.8, "val_ndcg@1": 0.31, "val_ndcg@3": 0.35, "val_ndcg@5": 0.38,
     "val_ndcg@10": 0.41},
    {"epoch": 2, "step": 12, "train_loss": 1.5, "learning_rate": 0.0},
    {"epoch": 2, "step": 12, "val_loss": 1.9, "val_ndcg@1": 0.30, "val_ndcg@3": 0.33, "val_ndcg@5": 0.36,
     "val_ndcg@10": 0.39},
]
FINAL = {"train_loss": 1.5, "val_loss": 1.8, "val_ndcg@1": 0.31, "val_ndcg@3": 0.35, "val_ndcg@5": 0.38,
         "val_ndcg@10": 0.41, "test_ndcg@10": 0.45, "exported_step": 8, "exported_epoch": 1}


def test_ndcg_curves_are_in_numeric_cutoff_order_and_hold_every_epoch_with_its_own_value():
    # When the NDCG curves are built from the history and the final metrics
    plotted = curves(HISTORY, ("val_ndcg@",), FINAL)
    # Then the legend reads 1, 3, 5, 10 (not 1, 10, 3, 5) and each curve has every epoch's own validation: the
    # exported (best) epoch's metrics do not replace the last epoch's
    assert [name for name, _, _ in plotted] == ["val_ndcg@1", "val_ndcg@3", "val_ndcg@5", "val_ndcg@10"]
    name, steps, values = plotted[-1]
    assert steps == [8, 12]
    assert values == [0.41, 0.39]


def test_loss_curves_run_to_the_last_step():
    plotted = dict((name, (steps, values)) for name, steps, values in curves(HISTORY, ("train_loss", "val_loss"), FINAL))
    assert plotted["val_loss"] == ([8, 12], [1.8, 1.9])
    assert plotted["train_loss"] == ([4, 8, 12], [1.9, 1.7, 1.5])


def test_the_exported_step_is_marked_with_its_epoch():
    assert exported_mark(FINAL) == (8, "exported: epoch 1")
    assert exported_mark(None) is None


def test_the_exported_weights_are_a_point_of_their_own_only_where_no_line_validated_their_step():
    # Given a run that --max-steps ended at step 3, before any epoch's validation, so its last weights were exported
    history = [{"epoch": 0, "step": 2, "train_loss": 1.9}, {"epoch": 0, "step": 3, "train_loss": 1.8}]
    final = {"train_loss": 1.8, "val_loss": 1.7, "val_ndcg@10": 0.4, "exported_step": 3, "exported_epoch": 0}
    # Then the validation curves have that one point, and the training loss only its own lines
    plotted = dict((name, (steps, values)) for name, steps, values in curves(history, ("train_loss", "val_loss"),
                                                                              final))
    assert plotted == {"train_loss": ([2, 3], [1.9, 1.8]), "val_loss": ([3], [1.7])}


def test_both_figures_are_written(tmp_path):
    written = plot_curves(HISTORY, tmp_path, FINAL)
    assert [path.name for path in written] == ["loss.png", "ndcg.png"]
    assert all(path.read_bytes().startswith(b"\x89PNG") for path in written)


def test_a_child_process_draws_the_same_figures_while_the_caller_goes_on(tmp_path):
    # When the figures are drawn in a child process, and waited for
    plotting = start_plotting(HISTORY, tmp_path, FINAL)
    plotting.wait()
    # Then both files are there, as plot_curves writes them, beside what they were drawn from
    assert sorted(path.name for path in tmp_path.iterdir()) == ["history.json", "loss.png", "ndcg.png"]
    assert all((tmp_path / name).read_bytes().startswith(b"\x89PNG") for name in ("loss.png", "ndcg.png"))
    assert json.loads((tmp_path / "history.json").read_text()) == {"history": HISTORY, "final_metrics": FINAL}


def test_a_child_that_fails_says_so(tmp_path):
    # Given a figure the child cannot write (a folder is in its place)
    (tmp_path / "loss.png").mkdir()
    # Then waiting for it raises, naming what failed
    with pytest.raises(RuntimeError, match="drawing the loss and NDCG curves failed"):
        start_plotting(HISTORY, tmp_path, FINAL).wait()
