"""The channels' text parsed while the entry point imports torch (and Lightning).

`python train_ddp.py` calls `start` before its other imports: the parser's worker processes
(ranker.data.letor_processes) then read the training, validation and test text while this process imports, on the
cores the import leaves idle, instead of after it; the session's `load_channel` collects their rows. The imports can
outlast the parse (Lightning's do on a GPU host: they pull in torchmetrics and whatever its optional domains find
installed), so the test channel, which the session reads only after the training channel, is started too. Where
that could waste work it starts nothing and the session parses as it always does: several processes on this host (one
of them parses for all, ranker.data.host_cache) or a streamed or sharded training channel. Flags the run refuses end
the process here, before the imports, as the session would report them after: one line, exit status 2 and the
job's failure reason (sagemaker_distributed.failure), a second after launch instead of once torch and Lightning
are loaded.

This module, and everything it imports, loads without torch.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from sagemaker_distributed.failure import failure_reported
from sagemaker_distributed.topology import detect_topology

from ranker.config import ConfigError, parse_config
from ranker.data import channels


def start(argv: Sequence[str], description: str, env: Mapping[str, str] = os.environ) -> None:
    """Starts parsing the training channel that `argv` and `env` name (with `description`, the entry point's help
    text, so that `--help` reads the same from here); exits with status 2 on a flag the run would refuse."""
    with failure_reported(env, usage_errors=(ConfigError,)):
        config = parse_config(argv, env, description)
    if config.data.streaming or config.data.train_sharded or detect_topology(env).local_world_size > 1:
        return
    for channel in (config.data.train, config.data.validation, config.data.test):
        if channel is None:
            continue
        try:
            channels.parse_ahead(channel)
        except OSError:
            continue  # an unreadable channel: the session's own read reports it
