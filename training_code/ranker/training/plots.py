"""Loss and NDCG curves as PNG files, for the job's output data.

A job draws them in a child process (`start_plotting`) while it writes its model: importing matplotlib and
rendering take about as long as the exports, and neither needs the other. What they are drawn from stays beside them
in `history.json`: every metric line of the run and the final metrics (metrics.json's, with the exported step).

    python -m ranker.training.plots FOLDER    # draws FOLDER/history.json into FOLDER
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

Curve = tuple[str, list[float], list[float]]
FIGURES = (("loss.png", ("train_loss", "val_loss"), "loss"), ("ndcg.png", ("val_ndcg@",), "NDCG"))
HISTORY_FILE = "history.json"
_CUTOFF = re.compile(r"^(.*@)(\d+)$")


def plot_curves(history: list[dict[str, float]], folder: Path,
                final_metrics: dict[str, float] | None = None) -> list[Path]:
    """`loss.png` (train and validation loss) and `ndcg.png` (validation NDCG@k) against the step, over the whole
    run, with the step whose weights were exported (`final_metrics`, metrics.json's) marked."""
    # Imported here, once the run has trained: matplotlib takes longer to import than the rest of the entry point
    # beside torch (docs/benchmarks.md, CPU data path), and a job that fails earlier needs none of it.
    import matplotlib

    matplotlib.use("Agg")  # training hosts have no display
    import matplotlib.pyplot as plt

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for filename, prefixes, ylabel in FIGURES:
        figure, axes = plt.subplots(figsize=(6, 4))
        plotted = curves(history, prefixes, final_metrics)
        for name, steps, values in plotted:
            axes.plot(steps, values, label=name, marker="." if len(steps) < 50 else None)
        mark = exported_mark(final_metrics)
        if mark is not None:
            axes.axvline(mark[0], color="gray", linestyle=":", label=mark[1])
        axes.set_xlabel("step")
        axes.set_ylabel(ylabel)
        if plotted:
            axes.legend()
        figure.tight_layout()
        figure.savefig(folder / filename, dpi=100)
        plt.close(figure)
        written.append(folder / filename)
    return written


class Plotting:
    """The child process drawing the curves (`start_plotting`); `wait` for it before the job ends."""

    def __init__(self, process: subprocess.Popen):
        self.process = process

    def wait(self) -> None:
        if self.process.wait():
            raise RuntimeError(f"drawing the loss and NDCG curves failed (exit status {self.process.returncode}): "
                               "its error is in the log above")


def start_plotting(history: list[dict[str, float]], folder: Path,
                   final_metrics: dict[str, float] | None = None) -> Plotting:
    """Writes `folder/history.json`, then `plot_curves` of it in a child process of its own interpreter (this module
    and matplotlib only: nothing of the training process is imported again), running alongside the caller."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / HISTORY_FILE).write_text(json.dumps({"history": history, "final_metrics": final_metrics}))
    package_root = str(Path(__file__).resolve().parents[2])  # the folder holding `ranker`
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_root,
                                                                             os.environ.get("PYTHONPATH")]))}
    # Its errors go to this job's log.
    return Plotting(subprocess.Popen([sys.executable, "-m", __name__, str(folder)], env=environment))


def curves(history: list[dict[str, float]], prefixes: tuple[str, ...],
           final_metrics: dict[str, float] | None = None) -> list[Curve]:
    """`(name, steps, values)` of each metric starting with one of `prefixes`, in legend order (`@k` cutoffs in
    numeric order: 1, 3, 5, 10), from every line the run logged. The exported weights' validation metrics
    (`final_metrics`) are a point of their own only at a step no line validated (train_lightning.py stopped by
    --max-steps before its first validation): elsewhere the run's line at that step holds them."""
    rows = list(history)
    if final_metrics and "exported_step" in final_metrics:
        rows.append({"step": final_metrics["exported_step"],
                     **{name: value for name, value in final_metrics.items() if name.startswith("val_")}})
    names = sorted({name for row in rows for name in row if name.startswith(prefixes)}, key=_legend_order)
    plotted = []
    for name in names:
        points: dict[float, float] = {}
        for row in rows:
            if name in row:
                points.setdefault(row["step"], row[name])
        steps = sorted(points)
        plotted.append((name, steps, [points[step] for step in steps]))
    return plotted


def exported_mark(final_metrics: dict[str, float] | None) -> tuple[float, str] | None:
    """Where the plots mark the exported weights, and the mark's label: the step and epoch metrics.json names."""
    if not final_metrics or "exported_step" not in final_metrics:
        return None
    return final_metrics["exported_step"], f"exported: epoch {int(final_metrics['exported_epoch'])}"


def _legend_order(name: str) -> tuple[str, int]:
    match = _CUTOFF.match(name)
    return (match.group(1), int(match.group(2))) if match else (name, 0)


if __name__ == "__main__":
    curves_data = json.loads((Path(sys.argv[1]) / HISTORY_FILE).read_text())
    plot_curves(curves_data["history"], Path(sys.argv[1]), curves_data["final_metrics"])
