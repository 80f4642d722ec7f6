"""Runs a training script (the first argument) with ranker.gpu.fast_paths' FusedDataParallel and sharded-update decisions
forced on wherever there are several processes, so that the GPU path's data parallelism runs on CPU with gloo (the
fused layers and FusedDataParallel run on CPU for their tests). Each dense layer gets a bucket of its own: a small
model then has several, and so the sharded update, which with the shipped 25 MB buckets takes layers of width 2048
(bf16 on a CPU: minutes)."""

from __future__ import annotations

import dataclasses
import runpy
import sys

from ranker.gpu.fused_data_parallel import FusedDataParallel
from ranker.training import engine

chosen_path = engine.training_path


def forced_path(config, device, world_size):
    several = world_size > 1
    return dataclasses.replace(chosen_path(config, device, world_size), fused_data_parallel=several,
                               sharded_update=several)


class BucketPerLayer(FusedDataParallel):
    def __init__(self, module, bucket_bytes: int = 1, shard_optimizer: bool = False):
        super().__init__(module, 1, shard_optimizer)


if __name__ == "__main__":
    engine.training_path = forced_path
    engine.FusedDataParallel = BucketPerLayer
    script = sys.argv.pop(1)
    sys.argv[0] = script
    runpy.run_path(script, run_name="__main__")
