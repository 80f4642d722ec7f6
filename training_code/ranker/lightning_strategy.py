"""`DDPStrategy` with the native trainer's data parallelism where it is faster than DDP.

Why: on GPU with NCCL, bf16 and the fused layers, the native loop averages gradients with FusedDataParallel (each
layer's gradient GEMM writes into the all-reduce buffer, reductions start before the input gradient's GEMM) and, where
the layers fill several buckets, updates a 1/world_size shard of the weights beside the backward pass (ShardedAdamW).
DDP cannot do either, and is measurably slower at both widths (docs/benchmarks.md, the data-parallel section).
`configure_ddp` is the documented place where a DDP strategy wraps the model, and in Lightning's `setup` it runs
before `setup_optimizers`, so the module's `configure_optimizers` sees the wrapper and builds the sharded optimizer
for it (ranker.lightning_module). Wherever ranker.fast_paths does not choose FusedDataParallel (CPU, gloo, fp32, the
bf16 all-reduce hook, `--compile true`), this is Lightning's DDPStrategy unchanged.
"""

from __future__ import annotations

from lightning.pytorch.strategies import DDPStrategy

from ranker import engine
from ranker.lightning_module import RankingModule


class FusedDataParallelStrategy(DDPStrategy):
    """Takes DDPStrategy's arguments. Trains a `RankingModule` through FusedDataParallel where ranker.fast_paths
    chooses it for this process, through DDP otherwise."""

    def configure_ddp(self) -> None:
        module = self.lightning_module
        if not isinstance(module, RankingModule):
            raise TypeError(f"{type(self).__name__}: trains a RankingModule, got {type(module).__name__}; "
                            "use DDPStrategy for other modules")
        config, device = module.train_config, self.root_device
        path = engine.training_path(config, device, self.world_size)
        if not path.fused_data_parallel:
            super().configure_ddp()
            return
        # The strategy's `model` stays the LightningModule (Lightning then calls its steps directly, as for one
        # device); the module's forward runs through the wrapper, which reduces the gradients in the backward pass.
        module.train_through(engine.wrap_for_training(module.model, device, self.world_size, config))
