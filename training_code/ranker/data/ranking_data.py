"""The in-memory form of ranking data every reader produces and every loop consumes."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class RankingData:
    """Documents as dense float32 rows; query `q` owns rows `query_offsets[q]:query_offsets[q + 1]`."""

    features: np.ndarray
    labels: np.ndarray
    query_offsets: np.ndarray

    @property
    def num_queries(self) -> int:
        return len(self.query_offsets) - 1

    @property
    def num_features(self) -> int:
        return self.features.shape[1]

    @property
    def max_docs(self) -> int:
        return int(np.diff(self.query_offsets).max(initial=0))

    def select_queries(self, query_indices: np.ndarray) -> RankingData:
        sizes = np.diff(self.query_offsets)[query_indices]
        offsets = np.concatenate([[0], np.cumsum(sizes)])
        # Row k of the i-th selected query: its first row plus k, built for all rows at once.
        rows = np.arange(offsets[-1]) + np.repeat(self.query_offsets[query_indices] - offsets[:-1], sizes)
        return RankingData(self.features[rows], self.labels[rows], offsets)

    def padded(self, max_docs: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`[queries, max_docs, features]` features, `[queries, max_docs]` labels and mask, so per-query
        losses and metrics vectorise; padded slots are zero and masked out."""
        max_docs = max_docs or self.max_docs
        sizes = np.diff(self.query_offsets)
        mask = np.arange(max_docs)[None, :] < sizes[:, None]
        features = np.zeros((self.num_queries, max_docs, self.num_features), dtype=np.float32)
        labels = np.zeros((self.num_queries, max_docs), dtype=np.float32)
        features[mask] = self.features
        labels[mask] = self.labels
        return features, labels, mask

    def with_log1p(self) -> RankingData:
        return RankingData(np.log1p(np.maximum(self.features, 0)), self.labels, self.query_offsets)


def concatenate(parts: list[RankingData]) -> RankingData:
    if len(parts) == 1:
        return parts[0]  # a channel of one file: no copy of its (possibly multi-GB) features
    offsets = [parts[0].query_offsets]
    for part in parts[1:]:
        offsets.append(part.query_offsets[1:] + offsets[-1][-1])
    return RankingData(np.concatenate([p.features for p in parts]), np.concatenate([p.labels for p in parts]),
                       np.concatenate(offsets))
