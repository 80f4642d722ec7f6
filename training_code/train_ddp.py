"""Trains the ranking MLP with native PyTorch DistributedDataParallel.

Launch commands (all flags optional except the training channel outside SageMaker):

    # one process (CPU or one GPU)
    python train_ddp.py --train /path/to/letor-dir --model-dir model --output-data-dir output --checkpoint-dir ckpt
    # several processes on one machine (gloo on CPU, NCCL on GPU)
    torchrun --standalone --nproc-per-node 2 train_ddp.py --train /path/to/letor-dir --model-dir model ...
    # mpirun (SageMaker `pytorchddp`/`smdistributed` do this): ranks from OMPI_COMM_WORLD_*
    mpirun -np 2 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=7777 python train_ddp.py --train ...
    # SageMaker (SDK v2)
    PyTorch(entry_point="train_ddp.py", source_dir="training_code", distribution={"torch_distributed":
            {"enabled": True}}, hyperparameters={"epochs": 40, "batch-size": 16}, ...).fit({"train": "s3://..."})

Every flag is listed by `python train_ddp.py --help` and in docs/training.md.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from ranker import checkpoint, engine
from ranker.losses import LOSSES
from ranker.meter import TrainingMeter
from ranker.progress import Progress
from ranker.session import Session, evaluation_metrics, finish_session, run_training


def train(session: Session) -> None:
    config, topology, device = session.config.train, session.topology, session.device
    batches = session.training_batches()
    total_steps = session.total_steps(batches.steps_per_epoch)
    model = engine.build_model(session.model_config, device)
    step, epoch, position = 0, 0, 0
    resumed = checkpoint.restore_training_state(session.config.paths.checkpoint_dir, model, topology.rank,
                                                topology.world_size)
    trained = engine.wrap_for_training(model, device, topology.world_size, config)
    optimizer = engine.build_optimizer(trained, config, device)
    scheduler = engine.build_scheduler(optimizer, total_steps, config.warmup_fraction)
    if resumed is not None:
        optimizer.load_state_dict(resumed["optimizer"])
        scheduler.load_state_dict(resumed["scheduler"])
        step, epoch, position = resumed["step"], resumed["epoch"], resumed["position"]
        session.history = resumed["history"]
        if resumed["rng"] is not None:
            checkpoint.set_rng_state(resumed["rng"])
    loss_function = LOSSES[config.loss]
    progress = Progress(total_steps, topology.is_main, step)
    if resumed is not None:
        progress.note(f"resumed from {resumed['path']} at step {step}")
    stop = checkpoint.StopSignal()
    meter = TrainingMeter(device)
    step_function = engine.step_function(trained, optimizer, scheduler, loss_function, device, config, meter)
    last_metrics: dict[str, float] = {}

    while step < total_steps:
        for batch in batches.epoch_batches(epoch, position):
            step_function(batch)
            step, position = step + 1, position + 1
            if position == batches.steps_per_epoch:
                epoch, position = epoch + 1, 0
            stopping = False
            if step % config.log_every == 0 or step == total_steps:
                window, stopping = meter.read(stop.received)
                last_metrics = {"epoch": epoch, "step": step, **window,
                                "learning_rate": engine.learning_rate(scheduler)}
                session.history.append(last_metrics)
                progress.report(last_metrics)
            if stopping or (config.checkpoint_every and step % config.checkpoint_every == 0):
                checkpoint.save_training_state(
                    session.config.paths.checkpoint_dir, topology.is_main, model=model, optimizer=optimizer,
                    scheduler=scheduler, step=step, epoch=epoch, position=position, history=session.history)
            if stopping:
                progress.note(f"SIGTERM: checkpoint written at step {step}; rerun to resume")
                return
            if step == total_steps:
                break
            if position == 0:
                validation = evaluation_metrics(engine.evaluate(trained, session.validation, topology.rank,
                                                                topology.world_size, loss_function), "val")
                session.history.append({"epoch": epoch, "step": step, **validation})
                progress.report(session.history[-1])
    progress.close()
    final = {"train_loss": last_metrics.get("train_loss", float("nan")),
             **evaluation_metrics(engine.evaluate(trained, session.validation, topology.rank, topology.world_size,
                                                  loss_function), "val")}
    if session.test is not None:
        final.update(evaluation_metrics(engine.evaluate(trained, session.test, topology.rank, topology.world_size,
                                                        loss_function), "test"))
    progress.report({"epoch": epoch, "step": step, **final})
    finish_session(session, model, final)


def main(argv: Sequence[str] | None = None) -> None:
    run_training(train, sys.argv[1:] if argv is None else argv, __doc__)


if __name__ == "__main__":
    main()
