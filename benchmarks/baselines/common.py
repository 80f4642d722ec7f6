"""What both naive baselines share: the command line, the model and the synthetic data they train on."""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from torch import nn


def parse_args(description: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--widths", default="1024,4096", help="comma-separated hidden widths to measure in turn")
    parser.add_argument("--features", type=int, default=136)
    parser.add_argument("--batch-size", type=int, default=8192, help="samples per GPU per step")
    parser.add_argument("--warmup-steps", type=int, default=10)
    parser.add_argument("--steps-per-window", type=int, default=20)
    parser.add_argument("--windows", type=int, default=5)
    parser.add_argument("--results", type=Path, required=True, help="JSON-lines file rank 0 appends to")
    args = parser.parse_args()
    args.widths = [int(width) for width in args.widths.split(",")]
    return args


def dense_mlp(features: int, width: int, layers: int = 7) -> nn.Sequential:
    """The benchmark's model: `layers` dense layers, ReLU between them, one score out."""
    sizes = [features] + [width] * (layers - 1) + [1]
    modules: list[nn.Module] = []
    for index, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        modules.append(nn.Linear(fan_in, fan_out))
        if index < layers - 1:
            modules.append(nn.ReLU())
    return nn.Sequential(*modules)


def synthetic_dataset(features: int, samples: int, seed: int = 0) -> torch.utils.data.TensorDataset:
    generator = torch.Generator().manual_seed(seed)
    inputs = torch.rand(samples, features, generator=generator)
    labels = torch.randint(0, 5, (samples,), generator=generator).float()
    return torch.utils.data.TensorDataset(inputs, labels)
