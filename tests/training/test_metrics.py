"""NDCG@k per query, averaged, against scikit-learn's definition."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from ranker.data.channels import RankingData
from ranker.model.metrics import NDCG_CUTOFFS, ndcg_means, ndcg_per_query, ndcg_sums
from sklearn.metrics import ndcg_score
from torch_threads import cpu_threads


def random_queries(seed: int, num_queries: int = 30) -> RankingData:
    rng = np.random.default_rng(seed)
    sizes = rng.integers(2, 25, size=num_queries)
    labels = rng.integers(0, 5, size=sizes.sum()).astype(np.float32)
    return RankingData(rng.random((sizes.sum(), 1), dtype=np.float32), labels, np.concatenate([[0], np.cumsum(sizes)]))


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("k", NDCG_CUTOFFS)
def test_ndcg_matches_sklearn_per_query_then_averaged(seed, k):
    # Given queries of different lengths (so padding is involved) and continuous scores
    data = random_queries(seed)
    scores = np.random.default_rng(seed + 100).normal(size=len(data.labels)).astype(np.float32)
    _, labels, mask = data.padded()
    padded_scores = np.zeros(mask.shape, dtype=np.float32)
    padded_scores[mask] = scores
    # When NDCG@k is computed on the padded layout
    ours = ndcg_per_query(torch.from_numpy(padded_scores), torch.from_numpy(labels), torch.from_numpy(mask), k)
    # Then each query and the mean match scikit-learn's ndcg_score on that query alone
    expected = [ndcg_score([data.labels[a:b]], [scores[a:b]], k=k)
                for a, b in zip(data.query_offsets[:-1], data.query_offsets[1:])]
    np.testing.assert_allclose(ours.numpy(), expected, rtol=1e-5, atol=1e-6)
    totals = ndcg_sums(torch.from_numpy(padded_scores), torch.from_numpy(labels), torch.from_numpy(mask))
    assert ndcg_means(totals.tolist(), "val")[f"val_ndcg@{k}"] == pytest.approx(np.mean(expected), rel=1e-5)


def test_query_without_relevant_documents_scores_zero_like_sklearn():
    # Given a query whose documents are all irrelevant
    scores, labels = torch.tensor([[0.3, 0.1, 0.2]]), torch.zeros(1, 3)
    # When NDCG is computed, Then it is 0, as sklearn defines it
    assert ndcg_per_query(scores, labels, torch.ones(1, 3, dtype=torch.bool), 10).item() == 0.0
    assert ndcg_score([[0, 0, 0]], [[0.3, 0.1, 0.2]]) == 0.0


def test_padded_slots_never_take_a_rank():
    # Given a padded slot with a score higher than every real document
    scores = torch.tensor([[0.1, 0.9, 5.0]])
    labels = torch.tensor([[1.0, 0.0, 0.0]])
    mask = torch.tensor([[True, True, False]])
    # When NDCG@1 is computed, Then it is that of the two real documents only
    assert ndcg_per_query(scores, labels, mask, 1).item() == pytest.approx(ndcg_score([[1, 0]], [[0.1, 0.9]], k=1))


def test_evaluation_on_a_cpu_scores_every_query_once_whatever_its_threads_and_batches():
    # Given a small ranking model and queries of 60 documents (so several batches of CPU_EVALUATION_DOCUMENTS)
    from ranker.config import ModelConfig
    from ranker.data.batches import DeviceQueries
    from ranker.model.losses import pairwise_logistic_loss
    from ranker.model.mlp import RankingMLP
    from ranker.training import engine

    torch.manual_seed(0)
    rng = np.random.default_rng(3)
    data = RankingData(rng.random((45 * 60, 5), dtype=np.float32), rng.integers(0, 5, 45 * 60).astype(np.float32),
                       np.arange(0, 45 * 60 + 1, 60))
    model = RankingMLP(ModelConfig(num_features=5, width=8, num_layers=2, bins=4, embedding_width=3,
                                   embedding_layers=2))
    model.encoding.fit(data.features)
    queries = DeviceQueries.from_data(data, torch.device("cpu"))
    threads = torch.get_num_threads()
    # When engine.evaluate scores them on 3 threads, and the model scores all of them in one call
    with cpu_threads(3):
        totals = engine.evaluate(model, queries, 0, 1, pairwise_logistic_loss).tolist()
    with torch.no_grad():
        scores = model.eval()(queries.features)
    # Then the totals are those of every query once, and the caller's thread count is back
    assert torch.get_num_threads() == threads
    expected = [ndcg_per_query(scores, queries.labels, queries.mask, k).sum().item() for k in NDCG_CUTOFFS]
    assert totals[:4] == pytest.approx(expected, rel=1e-5) and totals[4] == 45
    # (the loss is a per-query mean: the totals hold it times the queries)
    assert totals[5] == pytest.approx(45 * pairwise_logistic_loss(scores, queries.labels, queries.mask).item(),
                                      rel=1e-4)
