"""Ranking losses over padded queries: scores, labels and mask are `[queries, max_docs]`."""

from __future__ import annotations

from collections.abc import Callable

import torch

# Large but finite, so masked slots get zero probability without producing inf - inf = NaN.
_MASKED_LOGIT = -1e9


def _softmax_cross_entropy(scores: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """`[queries]` cross-entropy between the target distribution and softmax(scores) within each query, in float32
    so bf16 scores do not lose the softmax's precision."""
    logits = scores.float().masked_fill(~mask, _MASKED_LOGIT)
    return -(target * torch.log_softmax(logits, dim=-1)).sum(dim=-1)


def listwise_softmax_loss(scores: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """ListNet top-1: cross-entropy between softmax(labels) and softmax(scores) within each query, averaged over the
    queries with a document (a batch slot without one, ranker.data.batches.OwnQueryBatches, adds nothing)."""
    target = torch.softmax(labels.float().masked_fill(~mask, _MASKED_LOGIT), dim=-1)
    has_documents = mask.any(dim=-1).float()
    return (_softmax_cross_entropy(scores, target, mask) * has_documents).sum() / has_documents.sum().clamp(min=1)


def graded_listwise_loss(scores: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Cross-entropy between targets proportional to NDCG's gains `2^label - 1` and softmax(scores) within each
    query (the softmax loss of Qin et al., ICLR 2021, with graded gains), averaged over the queries that have a
    relevant document: a query without one has nothing to rank and no NDCG to gain."""
    gains = (torch.exp2(labels.float()) - 1).masked_fill(~mask, 0.0)
    totals = gains.sum(dim=-1, keepdim=True)
    per_query = _softmax_cross_entropy(scores, gains / totals.clamp(min=1e-12), mask)
    has_gain = (totals.squeeze(-1) > 0).float()
    return (per_query * has_gain).sum() / has_gain.sum().clamp(min=1)


def pairwise_logistic_loss(scores: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """RankNet (Burges et al., ICML 2005): `log(1 + exp(-(s_i - s_j)))` for every pair of a query's documents where
    `i` has the higher label, averaged over all such pairs of the batch. Every pair of differently graded documents
    teaches, where a softmax over the query gives its top document most of the gradient: on the search-like
    benchmark's 1.2M documents it ranked best of the losses here. Builds `[queries, max_docs, max_docs]`, which
    stays small at the batch sizes a query-level batch holds (16 queries of 240 documents: 0.9M pairs)."""
    scores = scores.float()
    ordered = (labels[:, :, None] > labels[:, None, :]) & mask[:, :, None] & mask[:, None, :]
    margins = scores[:, :, None] - scores[:, None, :]
    return (torch.nn.functional.softplus(-margins) * ordered).sum() / ordered.sum().clamp(min=1)


def pointwise_mse_loss(scores: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Squared error against the graded label, averaged over real (unpadded) documents."""
    squared = (scores.float() - labels.float()).square() * mask
    return squared.sum() / mask.sum().clamp(min=1)


LOSSES: dict[str, Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "pairwise": pairwise_logistic_loss,
    "graded_listwise": graded_listwise_loss,
    "listwise": listwise_softmax_loss,
    "pointwise": pointwise_mse_loss,
}

SHIFT_INVARIANT_LOSSES = frozenset({"pairwise", "graded_listwise", "listwise"})
"""Losses blind to a constant added to every score of a query (see ModelConfig.output_bias)."""
