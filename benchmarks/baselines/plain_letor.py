"""A plain PyTorch ranking script, as an engineer writes one without this project: scikit-learn's svmlight loader, a
Dataset of whole queries, DataLoader with DistributedSampler, DDP, the same MLP and listwise loss as the project's
shipped defaults. benchmarks.ranking.time_to_model runs it beside the project's entry points:

    python benchmarks/baselines/plain_letor.py --train rank.train --test rank.test --epochs 10
    torchrun --standalone --nproc-per-node 2 benchmarks/baselines/plain_letor.py --train ... --test ... --epochs 10

It prints `plain: <event>` lines that benchmarks.ranking.time_to_model times as they arrive.
"""

from __future__ import annotations

import argparse
import os

import numpy as np
import torch
import torch.distributed as dist
from sklearn.datasets import load_svmlight_file
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


def mark(event: str) -> None:
    if int(os.environ.get("RANK", 0)) == 0:
        print(f"plain: {event}", flush=True)


class Queries(Dataset):
    """One item per query: its documents' features and labels (rows of a query are adjacent in LETOR files)."""

    def __init__(self, path: str):
        features, labels, qids = load_svmlight_file(path, dtype=np.float32, query_id=True, zero_based=False)
        dense = features.toarray()
        bounds = np.flatnonzero(np.diff(qids)) + 1
        self.features = np.split(dense, bounds)
        self.labels = np.split(labels.astype(np.float32), bounds)
        self.num_features = dense.shape[1]

    def __len__(self) -> int:
        return len(self.features)

    def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        return self.features[index], self.labels[index]


def pad_queries(items: list[tuple[np.ndarray, np.ndarray]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    longest = max(len(labels) for _, labels in items)
    features = torch.zeros(len(items), longest, items[0][0].shape[1])
    labels = torch.zeros(len(items), longest)
    mask = torch.zeros(len(items), longest, dtype=torch.bool)
    for row, (query_features, query_labels) in enumerate(items):
        features[row, :len(query_labels)] = torch.from_numpy(query_features)
        labels[row, :len(query_labels)] = torch.from_numpy(query_labels)
        mask[row, :len(query_labels)] = True
    return features, labels, mask


def mlp(features: int, width: int = 256, layers: int = 7, dropout: float = 0.3) -> nn.Sequential:
    modules: list[nn.Module] = []
    for fan_in in [features] + [width] * (layers - 2):
        modules += [nn.Linear(fan_in, width), nn.LayerNorm(width), nn.ReLU(), nn.Dropout(dropout)]
    return nn.Sequential(*modules, nn.Linear(width, 1, bias=False))


def listwise_loss(scores: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    scores = scores.masked_fill(~mask, float("-inf"))
    target = torch.softmax(labels.masked_fill(~mask, float("-inf")), dim=1)
    return -(target * torch.log_softmax(scores, dim=1).masked_fill(~mask, 0)).sum(1).mean()


def ndcg_at_10(scores: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-query NDCG@10 with linear gains, as sklearn.metrics.ndcg_score (queries without relevant documents: 0)."""
    gains = labels.masked_fill(~mask, 0)
    ranked = gains.gather(1, scores.masked_fill(~mask, float("-inf")).argsort(1, descending=True))[:, :10]
    ideal = gains.sort(1, descending=True).values[:, :10]
    discounts = 1 / torch.log2(torch.arange(ranked.shape[1], device=scores.device) + 2.0)
    dcg, best = (ranked * discounts).sum(1), (ideal * discounts).sum(1)
    return torch.where(best > 0, dcg / best.clamp(min=1e-12), 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--train", required=True)
    parser.add_argument("--test", required=True)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=16, help="queries per batch and process")
    args = parser.parse_args()
    distributed = int(os.environ.get("WORLD_SIZE", 1)) > 1
    device = torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}" if torch.cuda.is_available() else "cpu")
    if distributed:
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    mark("ingest start")
    train, test = Queries(args.train), Queries(args.test)
    mark("ingest end")
    torch.manual_seed(0)
    model = mlp(train.num_features).to(device)
    trained = DistributedDataParallel(model) if distributed else model
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    sampler = DistributedSampler(train) if distributed else None
    loader = DataLoader(train, batch_size=args.batch_size, sampler=sampler, shuffle=sampler is None,
                        collate_fn=pad_queries, num_workers=4, pin_memory=device.type == "cuda",
                        persistent_workers=True, drop_last=True)
    mark("training start")
    for epoch in range(args.epochs):
        if sampler is not None:
            sampler.set_epoch(epoch)
        for features, labels, mask in loader:
            features, labels, mask = (t.to(device, non_blocking=True) for t in (features, labels, mask))
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
                scores = trained(features).squeeze(-1)
            loss = listwise_loss(scores.float(), labels, mask)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    mark("training end")
    if int(os.environ.get("RANK", 0)) == 0:
        model.eval()
        total = 0.0
        with torch.no_grad():
            for features, labels, mask in DataLoader(test, batch_size=256, collate_fn=pad_queries):
                features, labels, mask = (t.to(device) for t in (features, labels, mask))
                total += float(ndcg_at_10(model(features).squeeze(-1).float(), labels, mask).sum())
        mark(f"evaluation end test_ndcg@10={total / len(test):.6f}")
        torch.save(model.state_dict(), os.environ.get("PLAIN_MODEL_PATH", "plain_model.pt"))
    if distributed:
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
