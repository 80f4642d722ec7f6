"""A job log that holds the run's own lines: Lightning 2.6's console without its product tips and without one
deprecation warning that torch raises inside Lightning, for any LightningModule.

Both are filtered where they come from, by name, so every other message Lightning logs or warns still shows:
- the tips ("💡 Tip: ... install litlogger / litmodels"), which Lightning logs at INFO through its
  `lightning.pytorch.utilities.rank_zero` logger (its console-logging docs configure Lightning's per-module loggers);
  no Trainer option turns them off while the job logs to its own loggers;
- torch's FutureWarning for `LeafSpec` (recent torch releases, 2.13 among them), which Lightning 2.6's
  `lightning.pytorch.utilities._pytree` triggers on every rank whenever it wraps a dataloader; no Trainer option avoids
  it, and the code it warns about is Lightning's, not the job's.
"""

from __future__ import annotations

import logging
import warnings

TIP_PREFIX = "💡 Tip:"
LIGHTNING_INFO_LOGGER = "lightning.pytorch.utilities.rank_zero"


class WithoutProductTips(logging.Filter):
    """Drops Lightning's product tips; passes every other record."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(TIP_PREFIX)


def quiet_lightning_console() -> None:
    """Installs both filters for this process (idempotent); call before building the Trainer."""
    logger = logging.getLogger(LIGHTNING_INFO_LOGGER)
    if not any(isinstance(existing, WithoutProductTips) for existing in logger.filters):
        logger.addFilter(WithoutProductTips())
    warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)` is deprecated",
                            category=FutureWarning, module=r"lightning\.pytorch\.utilities\._pytree")
