"""Native DDP in the shape of pytorch/examples' ddp-tutorial-series (`multigpu_torchrun.py`): a Trainer class around
a DistributedDataParallel model, a DistributedSampler, snapshots for restarts. Brought to the pipeline as a
SageMaker job.

The change for SageMaker is one call: `sagemaker_distributed.init_process_group()` where the tutorial sets the CUDA
device from LOCAL_RANK and calls `init_process_group(backend="nccl")`. It joins the ranks of every launcher SageMaker
uses (torchrun, and the mpirun of `pytorchddp`/`smdistributed`, which sets no LOCAL_RANK), picks smddp, NCCL or gloo,
and says which device this rank trains on. Arguments are flags, as SageMaker passes hyperparameters.

    torchrun --standalone --nproc-per-node 2 multigpu_torchrun.py --total-epochs 5 --save-every 2
    python multigpu_torchrun.py --total-epochs 5    # one process: a group of one rank, the same code
"""

from __future__ import annotations

import argparse
import os

import torch
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

import sagemaker_distributed


class RandomRegression(Dataset):
    """Pairs of random inputs and targets: the tutorial's stand-in for a real dataset."""

    def __init__(self, size: int, features: int = 20):
        generator = torch.Generator().manual_seed(0)
        self.data = [(torch.rand(features, generator=generator), torch.rand(1, generator=generator))
                     for _ in range(size)]

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.data[index]


class Trainer:
    def __init__(self, model: torch.nn.Module, train_data: DataLoader, optimizer: torch.optim.Optimizer,
                 save_every: int, snapshot_path: str, process: sagemaker_distributed.ProcessInfo):
        self.process, self.device = process, process.device
        self.train_data, self.optimizer = train_data, optimizer
        self.save_every, self.snapshot_path = save_every, snapshot_path
        self.epochs_run = 0
        model = model.to(self.device)
        if os.path.exists(snapshot_path):
            self._load_snapshot(model)
        self.model = DDP(model, device_ids=process.device_ids)

    def _load_snapshot(self, model: torch.nn.Module) -> None:
        snapshot = torch.load(self.snapshot_path, map_location=self.device, weights_only=True)
        model.load_state_dict(snapshot["MODEL_STATE"])
        self.epochs_run = snapshot["EPOCHS_RUN"]
        print(f"Resuming training from snapshot at Epoch {self.epochs_run}")

    def _run_batch(self, source: torch.Tensor, targets: torch.Tensor) -> float:
        self.optimizer.zero_grad()
        loss = F.mse_loss(self.model(source), targets)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def _run_epoch(self, epoch: int) -> None:
        self.train_data.sampler.set_epoch(epoch)
        for source, targets in self.train_data:
            loss = self._run_batch(source.to(self.device), targets.to(self.device))
        print(f"[rank {self.process.rank}] Epoch {epoch} | Steps: {len(self.train_data)} | Loss: {loss:.5f}")

    def _save_snapshot(self, epoch: int) -> None:
        torch.save({"MODEL_STATE": self.model.module.state_dict(), "EPOCHS_RUN": epoch}, self.snapshot_path)
        print(f"Epoch {epoch} | Training snapshot saved at {self.snapshot_path}")

    def train(self, max_epochs: int) -> None:
        for epoch in range(self.epochs_run, max_epochs):
            self._run_epoch(epoch)
            if self.process.is_main and epoch % self.save_every == 0:
                self._save_snapshot(epoch)


def main(save_every: int, total_epochs: int, batch_size: int, model_dir: str, snapshot_path: str) -> None:
    process = sagemaker_distributed.init_process_group()
    try:
        model = torch.nn.Linear(20, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
        dataset = RandomRegression(2048)
        train_data = DataLoader(dataset, batch_size=batch_size, pin_memory=process.device.type == "cuda", shuffle=False,
                                sampler=DistributedSampler(dataset))
        trainer = Trainer(model, train_data, optimizer, save_every, snapshot_path, process)
        trainer.train(total_epochs)
        if process.is_main:
            os.makedirs(model_dir, exist_ok=True)
            torch.save(trainer.model.module.state_dict(), os.path.join(model_dir, "model.pt"))
    finally:
        sagemaker_distributed.shutdown()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="simple distributed training job")
    parser.add_argument("--total-epochs", type=int, default=5, help="Total epochs to train the model")
    parser.add_argument("--save-every", type=int, default=2, help="How often to save a snapshot")
    parser.add_argument("--batch-size", type=int, default=32, help="Input batch size on each device")
    parser.add_argument("--model-dir", default=os.environ.get("SM_MODEL_DIR", "model"))
    parser.add_argument("--snapshot-path", default="snapshot.pt")
    args = parser.parse_args()
    main(args.save_every, args.total_epochs, args.batch_size, args.model_dir, args.snapshot_path)
