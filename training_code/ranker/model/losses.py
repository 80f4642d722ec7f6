"""Ranking losses over padded queries: scores, labels and mask are `[queries, max_docs]`."""

from __future__ import annotations

from collections.abc import Callable

import torch

# Large but finite, so masked slots get zero probability without producing inf - inf = NaN.
_MASKED_LOGIT = -1e9


def listwise_softmax_loss(scores: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """ListNet top-1: cross-entropy between softmax(labels) and softmax(scores) within each query, averaged over
    queries. Computed in float32 so bf16 scores do not lose the softmax's precision."""
    logits = scores.float().masked_fill(~mask, _MASKED_LOGIT)
    target = torch.softmax(labels.float().masked_fill(~mask, _MASKED_LOGIT), dim=-1)
    per_query = -(target * torch.log_softmax(logits, dim=-1)).sum(dim=-1)
    return per_query.mean()


def pointwise_mse_loss(scores: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Squared error against the graded label, averaged over real (unpadded) documents."""
    squared = (scores.float() - labels.float()).square() * mask
    return squared.sum() / mask.sum().clamp(min=1)


LOSSES: dict[str, Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "listwise": listwise_softmax_loss,
    "pointwise": pointwise_mse_loss,
}
