"""sagemaker_distributed's DDP strategy with the native trainer's data parallelism where it is faster than DDP.

Why: on GPU with NCCL, bf16 and the fused layers, the native loop averages gradients with FusedDataParallel (each
layer's gradient GEMM writes into the all-reduce buffer, reductions start before the input gradient's GEMM) and, where
the layers fill several buckets, updates a 1/world_size shard of the weights beside the backward pass (ShardedAdamW).
DDP cannot do either, and is measurably slower at both widths (docs/benchmarks.md, the data-parallel section).
`configure_ddp` is the documented place where a DDP strategy wraps the model, and in Lightning's `setup` it runs
before `setup_optimizers`, so the module's `configure_optimizers` sees the wrapper and builds the sharded optimizer
for it (ranker.lightning.module). Wherever ranker.gpu.fast_paths does not choose FusedDataParallel (CPU, gloo, fp32, the
bf16 all-reduce hook, `--compile true`), and for any other LightningModule, this is SageMakerDDPStrategy unchanged.
"""

from __future__ import annotations

from sagemaker_distributed.lightning import SageMakerDDPStrategy

from ranker.lightning.module import RankingModule
from ranker.training import engine


class FusedDataParallelStrategy(SageMakerDDPStrategy):
    """Takes SageMakerDDPStrategy's arguments. Trains a `RankingModule` through FusedDataParallel where
    ranker.gpu.fast_paths chooses it for this process, through DDP otherwise (and any other module through DDP)."""

    def configure_ddp(self) -> None:
        module = self.lightning_module
        if not isinstance(module, RankingModule):
            super().configure_ddp()
            return
        config, device = module.train_config, self.root_device
        path = engine.training_path(config, device, self.world_size)
        if not path.fused_data_parallel:
            super().configure_ddp()
            return
        # The strategy's `model` stays the LightningModule (Lightning then calls its steps directly, as for one
        # device); the module's forward runs through the wrapper, which reduces the gradients in the backward pass.
        module.train_through(engine.wrap_for_training(module.model, device, self.world_size, config))
