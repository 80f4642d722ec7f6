"""Loss and NDCG curves as PNG files, for the job's output data."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # training hosts have no display
import matplotlib.pyplot as plt  # noqa: E402


def plot_curves(history: list[dict[str, float]], folder: Path) -> list[Path]:
    """`loss.png` (train and validation loss) and `ndcg.png` (validation NDCG@k) against the step."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for filename, prefix, ylabel in (("loss.png", ("train_loss", "val_loss"), "loss"),
                                     ("ndcg.png", ("val_ndcg@",), "NDCG")):
        names = sorted({name for row in history for name in row if name.startswith(prefix)})
        figure, axes = plt.subplots(figsize=(6, 4))
        for name in names:
            points = [(row["step"], row[name]) for row in history if name in row]
            marker = "." if len(points) < 50 else None
            axes.plot([p[0] for p in points], [p[1] for p in points], label=name, marker=marker)
        axes.set_xlabel("step")
        axes.set_ylabel(ylabel)
        if names:
            axes.legend()
        figure.tight_layout()
        figure.savefig(folder / filename, dpi=100)
        plt.close(figure)
        written.append(folder / filename)
    return written
