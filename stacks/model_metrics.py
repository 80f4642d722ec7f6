"""Which of the training code's metrics describe the trained model, and which a registration threshold may name.

The names come from the training code's one list (`ranker/log_format.py`); what is left out are progress counters
of the run, not properties of the model it produced.
"""

from __future__ import annotations

from stacks.training_code_modules import ranker_module

RUN_PROGRESS_METRICS = frozenset({"epoch", "step", "learning_rate", "samples_per_second"})
MODEL_QUALITY_METRICS = tuple(name for name in ranker_module("log_format").METRIC_NAMES
                              if name not in RUN_PROGRESS_METRICS)
# A minimum means something only where higher is better: the NDCG metrics, not the losses.
THRESHOLD_METRICS = tuple(name for name in MODEL_QUALITY_METRICS if "_ndcg@" in name)
