"""A default PyTorch Lightning script: LightningModule + DataLoader, fp32, Trainer(strategy="ddp").

Launch: torchrun --nproc_per_node N -m benchmarks.baselines.naive_lightning --results results.jsonl
"""

from __future__ import annotations

import os
import tempfile

import lightning as L
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

from benchmarks.baselines.common import dense_mlp, parse_args, synthetic_dataset
from benchmarks.harness.lightning_timing import WindowTimer
from benchmarks.harness.models import PLAIN_MLP
from benchmarks.harness.timing import StepWindows, append_result, summarise


class RankingRegressor(L.LightningModule):
    def __init__(self, features: int, width: int) -> None:
        super().__init__()
        self.model = dense_mlp(features, width)

    def training_step(self, batch, batch_idx):
        inputs, labels = batch
        loss = F.mse_loss(self.model(inputs).squeeze(-1), labels)
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)


def main() -> None:
    args = parse_args(__doc__)
    cuda = torch.cuda.is_available()
    devices = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    nodes = int(os.environ.get("WORLD_SIZE", "1")) // devices
    dataset = synthetic_dataset(args.features, samples=args.batch_size * 16, seed=int(os.environ.get("RANK", "0")))
    for width in args.widths:
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if cuda else torch.device("cpu")
        windows = StepWindows(args.warmup_steps, args.steps_per_window, args.windows, device)
        trainer = L.Trainer(
            accelerator="gpu" if cuda else "cpu",
            devices=devices,
            num_nodes=nodes,
            strategy="ddp",
            max_steps=windows.total_steps,
            callbacks=[WindowTimer(windows)],
            default_root_dir=tempfile.mkdtemp(prefix="naive-lightning-"),
            enable_progress_bar=False,
        )
        loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True, pin_memory=cuda)
        trainer.fit(RankingRegressor(args.features, width), loader)
        result = summarise("naive-lightning", PLAIN_MLP, width, args.features, args.batch_size, windows)
        if trainer.global_rank == 0:
            append_result(args.results, result)
            print(f"naive-lightning width={width} world={result.world_size} samples/s={result.samples_per_second:,.0f}")


if __name__ == "__main__":
    main()
