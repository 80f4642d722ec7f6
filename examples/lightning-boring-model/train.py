"""Lightning's stock `BoringModel` trained as a SageMaker job: a Lightning script brought to the pipeline.

The one change for SageMaker is the strategy (and its import): `strategy=sagemaker_distributed.lightning.strategy()`
runs DDP over whatever processes the job's launcher started, on every distribution (torchrun for
`torch_distributed`, mpirun for `pytorchddp`/`smdistributed`, plain python for `none`), with smddp, NCCL or gloo as
the container allows.

    python train.py --epochs 2                      # one process, or Lightning's own DDP over this machine's GPUs
    torchrun --nproc-per-node 2 train.py            # several processes (what torch_distributed runs)
    mpirun -np 2 python train.py                    # what pytorchddp / smdistributed run
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.demos.boring_classes import BoringModel

import sagemaker_distributed.lightning


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--model-dir", type=Path, default=Path(os.environ.get("SM_MODEL_DIR", "model")))
    args = parser.parse_args()

    model = BoringModel()
    trainer = L.Trainer(max_epochs=args.epochs, logger=False, enable_checkpointing=False,
                        strategy=sagemaker_distributed.lightning.strategy())
    trainer.fit(model)
    if trainer.is_global_zero:
        args.model_dir.mkdir(parents=True, exist_ok=True)
        torch.save(model.state_dict(), args.model_dir / "model.pt")
        print(f"epochs={trainer.current_epoch} steps={trainer.global_step}", flush=True)


if __name__ == "__main__":
    main()
