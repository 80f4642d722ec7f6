"""The Lightning entry point's MLflow logger: Lightning's own `MLFlowLogger`, logging to the run that
ranker.training.tracking opened for the job, under the metric names both entry points log, and leaving the run's end
to that module."""

from __future__ import annotations

from collections.abc import Mapping

from lightning.pytorch.loggers import MLFlowLogger

from ranker.training.tracking import TrackedRun, metric_name


class RankingMLFlowLogger(MLFlowLogger):
    """`MLFlowLogger` whose metric names are written as the native loop writes them (`val_ndcg@10` ->
    `val_ndcg_at_10`) instead of having their `@` dropped with a warning on every line."""

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        super().log_metrics({metric_name(name): value for name, value in metrics.items()}, step)

    def finalize(self, status: str = "success") -> None:
        """Leaves the run open. Lightning finalizes its loggers after every fit, validate and test, and `MLFlowLogger`
        would end the run there: FINISHED after fit, before the best weights are scored and the model is written, and
        FAILED on the SIGTERM that stops a job to resume later. ranker.training.tracking ends it once: FINISHED with
        the model written, else as the entry point's run is left."""


def mlflow_logger(run: TrackedRun) -> RankingMLFlowLogger:
    """The logger of the job's run (rank 0's; Lightning logs from rank 0 only)."""
    return RankingMLFlowLogger(experiment_name=run.target.experiment_name, run_name=run.target.run_name,
                               tracking_uri=run.target.tracking_uri, run_id=run.run_id)
