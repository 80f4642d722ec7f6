"""The tree-shaped generator: its features, its labels graded within each query, and its text read back exactly."""

from __future__ import annotations

import numpy as np
import pytest
from ranker.data import synthetic, synthetic_trees
from sklearn.datasets import load_svmlight_file


def test_tree_shaped_data_has_heavy_tailed_uniform_and_binary_features():
    data = synthetic_trees.generate(200, docs_per_query=30, num_features=20, seed=3)
    heavy, uniform, binary = data.features[:, :8], data.features[:, 8:16], data.features[:, 16:]
    # Heavy-tailed: some zeros, a tail far above the median
    assert (heavy == 0).mean() > 0.05 and np.quantile(heavy, 0.99) > 20 * np.median(heavy)
    # Uniform in [0, 1] with 4 decimals; binary flags both present in every column
    assert uniform.min() >= 0 and uniform.max() <= 1 and abs(uniform.mean() - 0.5) < 0.05
    np.testing.assert_array_equal((np.rint(uniform * 10_000.0) / 10_000).astype(np.float32), uniform)
    assert {tuple(np.unique(column)) for column in binary.T} == {(0.0, 1.0)}


def test_each_query_is_graded_0_to_4_by_rank_within_it_most_documents_irrelevant():
    data = synthetic_trees.generate(300, docs_per_query=40, num_features=20, seed=5)
    shares = np.bincount(data.labels.astype(int), minlength=5) / len(data.labels)
    assert shares.argmax() == 0 and shares.min() > 0 and shares[4] < shares[0] / 10
    # Grades are by rank within each query: in every query of several documents its best is graded 4, its worst 0
    sizes = np.diff(data.query_offsets)
    for first, size in zip(data.query_offsets[:-1], sizes):
        if size > 1:
            assert (data.labels[first:first + size].min(), data.labels[first:first + size].max()) == (0, 4)
    # MSLR-like sizes: skewed, between an eighth of the typical size and twice it
    assert sizes.min() >= 5 and sizes.max() <= 80 and sizes.std() > 5


def test_a_seed_draws_the_same_documents_again_and_another_seed_others():
    first, again = (synthetic_trees.generate(20, 10, 12, seed=1) for _ in range(2))
    other = synthetic_trees.generate(20, 10, 12, seed=2)
    np.testing.assert_array_equal(first.features, again.features)
    np.testing.assert_array_equal(first.labels, again.labels)
    assert not np.array_equal(first.features[:50], other.features[:50])


def test_files_of_different_seeds_are_samples_of_one_ranking_problem():
    # The trees of a feature count, without noise, explain the labels of every seed's documents alike
    problem = synthetic_trees._problem(12)
    for seed in (1, 2):
        data = synthetic_trees.generate(300, 20, 12, seed=seed)
        assert np.corrcoef(problem.relevance(data.features), data.labels)[0, 1] > 0.6


def test_too_few_features_or_queries_are_refused_with_the_fix():
    with pytest.raises(ValueError, match="features: 2 is too few.*use at least 3"):
        synthetic_trees.generate(3, 5, num_features=2)
    with pytest.raises(ValueError, match="queries, docs_per_query: 0, 5: use at least 1"):
        synthetic_trees.generate(0, 5)


def test_tree_shaped_text_reads_back_exactly_with_scikit_learn(tmp_path):
    data = synthetic_trees.generate(10, docs_per_query=8, num_features=10, seed=2)
    assert data.features.max() >= 100  # heavy-tailed values with several integer digits
    path = synthetic.write_letor(data, tmp_path, with_qid=True)
    features, labels, query_ids = load_svmlight_file(str(path), n_features=10, query_id=True, dtype=np.float32)
    np.testing.assert_array_equal(features.toarray(), data.features)
    np.testing.assert_array_equal(labels, data.labels)
    np.testing.assert_array_equal(np.bincount(query_ids)[1:], np.diff(data.query_offsets))
