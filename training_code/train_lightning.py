"""Trains the ranking MLP with PyTorch Lightning (same model, data and metrics as train_ddp.py).

Launch commands (all flags optional except the training channel outside SageMaker):

    # one process (CPU or one GPU)
    python train_lightning.py --train /path/to/letor-dir --model-dir model --output-data-dir out --checkpoint-dir ckpt
    # several processes on one machine (gloo on CPU, NCCL on GPU)
    torchrun --standalone --nproc-per-node 2 train_lightning.py --train /path/to/letor-dir --model-dir model ...
    # mpirun (SageMaker `pytorchddp`/`smdistributed` do this): ranks from OMPI_COMM_WORLD_*
    mpirun -np 2 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=7777 python train_lightning.py --train ...
    # SageMaker (SDK v2)
    PyTorch(entry_point="train_lightning.py", source_dir="training_code", distribution={"torch_distributed":
            {"enabled": True}}, hyperparameters={"epochs": 40, "batch-size": 16}, ...).fit({"train": "s3://..."})

Every flag is listed by `python train_lightning.py --help` and in docs/training.md.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import lightning as L
from lightning.pytorch.strategies import DDPStrategy, SingleDeviceStrategy

from ranker.cluster_environment import SageMakerEnvironment
from ranker.lightning_module import RankingModule
from ranker.session import Session, finish_session, run_training


class ModuleWrapsDDP(DDPStrategy):
    """Lightning's multi-process set-up (cluster environment, process group, one device per rank) without wrapping
    the LightningModule in DDP: RankingModule wraps its model itself (engine.wrap_for_training, as the native loop
    does) so that its step, CUDA-graphed on GPU, owns the all-reduce."""

    def configure_ddp(self) -> None:
        pass


def build_trainer(session: Session, steps_left: int) -> L.Trainer:
    topology, device = session.topology, session.device
    if topology.world_size > 1:
        strategy = ModuleWrapsDDP(cluster_environment=SageMakerEnvironment(topology),
                                  process_group_backend=session.backend)
    else:
        strategy = SingleDeviceStrategy(device=device)
    # "32-true": the engine's step applies bf16 autocast itself, exactly as in the native loop.
    return L.Trainer(accelerator="gpu" if device.type == "cuda" else "cpu", devices=topology.local_world_size,
                     num_nodes=topology.num_nodes, strategy=strategy, max_steps=steps_left, max_epochs=-1,
                     precision="32-true", logger=False,
                     enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                     num_sanity_val_steps=0, use_distributed_sampler=False)


def train(session: Session) -> None:
    batches = session.training_batches()
    total_steps = session.total_steps(batches.steps_per_epoch)
    module = RankingModule(session, batches, total_steps)
    if module.step < total_steps:
        build_trainer(session, total_steps - module.step).fit(module)
    if module.stopped:
        return
    module.to(session.device)  # Lightning hands the module back on the CPU after fit
    module.progress.close()
    final = {"train_loss": module.last_metrics.get("train_loss", float("nan")), **module.evaluate("val")}
    if session.test is not None:
        final.update(module.evaluate("test"))
    module.progress.report({"epoch": module.epoch, "step": module.step, **final})
    finish_session(session, module.model, final)


def main(argv: Sequence[str] | None = None) -> None:
    run_training(train, sys.argv[1:] if argv is None else argv, __doc__)


if __name__ == "__main__":
    main()
