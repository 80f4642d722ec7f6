"""The Lightning entry point's MLflow logger: Lightning's own `MLFlowLogger`, logging to the run that
ranker.training.tracking opened for the job, under the metric names both entry points log."""

from __future__ import annotations

from collections.abc import Mapping

from lightning.pytorch.loggers import MLFlowLogger

from ranker.training.tracking import TrackedRun, metric_name


class RankingMLFlowLogger(MLFlowLogger):
    """`MLFlowLogger` whose metric names are written as the native loop writes them (`val_ndcg@10` ->
    `val_ndcg_at_10`) instead of having their `@` dropped with a warning on every line."""

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        super().log_metrics({metric_name(name): value for name, value in metrics.items()}, step)


def mlflow_logger(run: TrackedRun) -> RankingMLFlowLogger:
    """The logger of the job's run (rank 0's; Lightning logs from rank 0 only)."""
    return RankingMLFlowLogger(experiment_name=run.target.experiment_name, run_name=run.target.run_name,
                               tracking_uri=run.target.tracking_uri, run_id=run.run_id)
