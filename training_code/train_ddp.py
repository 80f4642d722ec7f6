"""Trains the ranking MLP with a native PyTorch loop: DDP across processes, or on GPU the fast paths this torch allows
(ranker.gpu.fast_paths; rank 0 logs the path taken as its first line).

Launch commands (all flags optional except the training channel outside SageMaker):

    # one process (CPU or one GPU)
    python train_ddp.py --train /path/to/letor-dir --model-dir model --output-data-dir output --checkpoint-dir ckpt
    # several processes on one machine (gloo on CPU, NCCL on GPU)
    torchrun --standalone --nproc-per-node 2 train_ddp.py --train /path/to/letor-dir --model-dir model ...
    # mpirun (SageMaker `pytorchddp`/`smdistributed` do this): ranks from OMPI_COMM_WORLD_*
    mpirun -np 2 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=7777 python train_ddp.py --train ...
    # SageMaker (SDK v2)
    PyTorch(entry_point="train_ddp.py", source_dir="training_code", distribution={"torch_distributed":
            {"enabled": True}}, hyperparameters={"epochs": 20, "batch-size": 32}, ...).fit({"train": "s3://..."})

Every flag is listed by `python train_ddp.py --help` and in docs/training.md.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from ranker.training import collector, early_parse, fast_exit

if __name__ == "__main__":
    # Before the imports below load torch: the training text is then parsed while they run, and the garbage
    # collector leaves the objects they create alone (ranker.training.collector).
    early_parse.start(sys.argv[1:], __doc__)
    collector.pause()

from ranker.native.bookkeeping import Bookkeeping
from ranker.training import checkpoint, engine
from ranker.training.session import Session, run_training


def train(session: Session) -> None:
    config, topology, device = session.config.train, session.topology, session.device
    batches = session.training_batches()
    total_steps = session.total_steps(batches.steps_per_epoch)
    model = session.build_model()
    resumed = checkpoint.restore_training_state(session.config.paths.checkpoint_dir, model, topology.rank,
                                                topology.world_size)
    parts = engine.build_training(model, device, topology.world_size, config, total_steps)
    books = Bookkeeping(session, parts, batches.steps_per_epoch, total_steps, resumed)
    step = engine.step_function(parts.trained, parts.optimizer, parts.scheduler, books.loss_function, device, config,
                                books.meter)
    while books.running:
        for batch in batches.epoch_batches(books.epoch, books.position):
            step(batch)
            if not books.step_done():
                break
    books.finish()


def main(argv: Sequence[str] | None = None) -> None:
    run_training(train, sys.argv[1:] if argv is None else argv, __doc__)


if __name__ == "__main__":
    main()
    fast_exit.leave()  # the run succeeded: its process ends without Python's teardown (ranker.training.fast_exit)
