"""NDCG@k per query, averaged over queries, exactly as `sklearn.metrics.ndcg_score` defines it (linear gains,
`1 / log2(rank + 1)` discounts, queries with no relevant document score 0).

Ranks hold different queries, so the mean is built from sums: each rank adds up its per-query NDCG and its query
count, one all-reduce (SUM, which every backend including smddp supports) adds those up, then one division.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

NDCG_CUTOFFS: tuple[int, ...] = (1, 3, 5, 10)


def ndcg_per_query(scores: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor, k: int) -> torch.Tensor:
    """`[queries]` NDCG@k of padded `[queries, max_docs]` scores; padded slots rank last and gain nothing."""
    scores = scores.float().masked_fill(~mask, float("-inf"))
    gains = labels.float().masked_fill(~mask, 0.0)
    ranked = gains.gather(-1, scores.argsort(dim=-1, descending=True, stable=True))
    ideal = gains.sort(dim=-1, descending=True).values
    positions = torch.arange(gains.shape[-1], device=gains.device)
    discounts = torch.where(positions < k, 1.0 / torch.log2(positions + 2.0), 0.0)
    dcg, ideal_dcg = (ranked * discounts).sum(-1), (ideal * discounts).sum(-1)
    return torch.where(ideal_dcg > 0, dcg / ideal_dcg.clamp(min=1e-12), 0.0)


def ndcg_sums(scores: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """`[sum NDCG@k for k in NDCG_CUTOFFS..., query count]`: the totals to add up across batches and ranks."""
    sums = [ndcg_per_query(scores, labels, mask, k).sum() for k in NDCG_CUTOFFS]
    return torch.stack(sums + [torch.tensor(float(scores.shape[0]), device=scores.device)])


def ndcg_means(totals: Sequence[float], prefix: str) -> dict[str, float]:
    """Turns `ndcg_sums` totals (read back to the host once) into `{prefix_ndcg@k: mean}`."""
    count = max(totals[len(NDCG_CUTOFFS)], 1.0)
    return {f"{prefix}_ndcg@{k}": total / count for k, total in zip(NDCG_CUTOFFS, totals)}
