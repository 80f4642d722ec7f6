"""Piecewise-linear encoding of each numeric feature (Gorishniy et al., "On Embeddings for Numerical Features in
Tabular Deep Learning", NeurIPS 2022), with bin edges at the feature's own quantiles on the training channel.

A feature becomes `bins` values: 1 for each bin wholly below it, its position inside the bin it falls in, 0 above.
The first dense layer then learns a piecewise-linear function of every feature, with a knot wherever the training
data is dense: thresholds on heavy-tailed counts and flags, which a plain MLP on raw values finds hard, come for free.
The edges are buffers: they travel in the state dict, the safetensors file and the TorchScript export, so serving
encodes exactly as training did.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch
from torch import nn

# Enough rows for quantiles good to a fraction of a bin, few enough that fitting takes well under a second.
FIT_ROWS = 200_000


class PiecewiseLinearEncoding(nn.Module):
    """`[..., features] -> [..., features * bins]`. Bins of zero width (a feature with fewer distinct values than
    bins: a flag has one bin) encode 0 whatever the input, so they add nothing to the first layer."""

    def __init__(self, num_features: int, bins: int):
        super().__init__()
        if bins < 1:
            raise ValueError(f"bins: {bins} is not a bin count; use at least 1")
        self.bins = bins
        # Filled by `fit` (or by loading a state dict); until then every bin has zero width.
        self.register_buffer("lower_edges", torch.zeros(num_features, bins))
        self.register_buffer("inverse_widths", torch.zeros(num_features, bins))

    @property
    def output_width(self) -> int:
        return self.lower_edges.numel()

    def fit(self, features: np.ndarray, seed: int = 0) -> PiecewiseLinearEncoding:
        """Edges at the quantiles of each column of `features` (`[rows, num_features]`, the training channel's
        documents as the model sees them); at most `FIT_ROWS` rows, drawn with `seed`."""
        if features.ndim != 2 or features.shape[1] != self.lower_edges.shape[0]:
            raise ValueError(f"features: shape {features.shape} does not match this encoding's "
                             f"{self.lower_edges.shape[0]} features; fit on the training channel's rows")
        if len(features) == 0:
            raise ValueError("features: no rows to fit the bin edges on; give the training channel some documents")
        if len(features) > FIT_ROWS:
            features = features[np.sort(np.random.default_rng(seed).choice(len(features), FIT_ROWS, replace=False))]
        levels = np.linspace(0, 1, self.bins + 1)
        lower, inverse = np.zeros(self.lower_edges.shape), np.zeros(self.lower_edges.shape)
        for column, quantiles in enumerate(column_quantiles(features, levels, torch.get_num_threads()).T):
            edges = np.unique(quantiles)
            widths = np.diff(edges)
            lower[column, :len(widths)] = edges[:-1]
            lower[column, len(widths):] = edges[-1]
            inverse[column, :len(widths)] = 1 / widths
        self.lower_edges.copy_(torch.from_numpy(lower))
        self.inverse_widths.copy_(torch.from_numpy(inverse))
        return self

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        # Each feature repeated once per bin against the flattened edges: the same values as broadcasting
        # `features[..., None]` against the `[features, bins]` edges and flattening, in a form torch 2.2's torch.export
        # can trace with a dynamic document count (the broadcast form trips its shape solver).
        repeated = features.repeat_interleave(self.bins, dim=-1)
        position = (repeated - self.lower_edges.flatten()) * self.inverse_widths.flatten()
        return position.clamp(0, 1)


def column_quantiles(rows: np.ndarray, levels: np.ndarray, threads: int = 1) -> np.ndarray:
    """`np.quantile(rows.astype(np.float64), levels, axis=0)` (numpy's default, linear interpolation) for finite
    `rows`, the same numbers in a fraction of the time: each column's order statistics by a partial sort of its own
    values (a float32 value is exact in float64, so they are the same order statistics) on `threads` threads, then
    numpy's interpolation between them, in float64, as numpy's `_lerp` writes it."""
    count = len(rows)
    virtual = (count - 1) * levels
    below = np.floor(virtual).astype(np.intp)
    above = np.minimum(below + 1, count - 1)
    weight = virtual - below
    columns = np.ascontiguousarray(rows.T)  # a copy, each column contiguous, partitioned in place
    needed = np.unique(np.concatenate([below, above]))

    def partition(part: np.ndarray) -> None:
        part.partition(needed, axis=1)  # numpy releases the interpreter lock while it sorts

    parts = [part for part in np.array_split(columns, max(1, threads)) if len(part)]
    with ThreadPoolExecutor(len(parts)) as pool:
        list(pool.map(partition, parts))
    lower, upper = columns[:, below].T.astype(np.float64), columns[:, above].T.astype(np.float64)
    difference = upper - lower
    quantiles = lower + difference * weight[:, None]
    np.subtract(upper, difference * (1 - weight[:, None]), out=quantiles,
                where=np.broadcast_to(weight[:, None] >= 0.5, quantiles.shape))
    return quantiles
