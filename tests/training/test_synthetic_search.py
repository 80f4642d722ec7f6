"""The search-like generator and the LETOR writer's raw counts, read back by scikit-learn's reader."""

from __future__ import annotations

import numpy as np
from ranker.data import synthetic, synthetic_search
from sklearn.datasets import load_svmlight_file


def test_search_like_data_has_heavy_tailed_counts_flags_graded_labels_and_skewed_query_sizes():
    data = synthetic_search.generate(300, docs_per_query=40, num_features=20, seed=5)
    counts, flags, scores = data.features[:, :8], data.features[:, 8:12], data.features[:, 12:]
    # Counts: whole numbers, many zeros, a tail far above the median
    assert np.all(counts == np.floor(counts)) and (counts == 0).mean() > 0.2
    assert np.quantile(counts, 0.99) > 20 * max(np.median(counts), 1)
    # Flags are 0 or 1; scores lie in [0, 1]
    assert set(np.unique(flags)) == {0.0, 1.0} and scores.min() >= 0 and scores.max() <= 1
    # Labels are grades 0-4, most documents irrelevant, every grade present
    shares = np.bincount(data.labels.astype(int), minlength=5) / len(data.labels)
    assert shares.argmax() == 0 and shares.min() > 0
    # Query sizes vary between an eighth of the typical size and twice it
    sizes = np.diff(data.query_offsets)
    assert sizes.min() >= 5 and sizes.max() <= 80 and sizes.std() > 5


def test_raw_counts_written_as_letor_text_read_back_exactly_with_scikit_learn(tmp_path):
    # Given features with several integer digits (raw counts), small fractions and zeros
    data = synthetic_search.generate(10, docs_per_query=6, num_features=10, seed=2)
    assert data.features.max() >= 100
    # When written as LETOR text with a qid column and read by scikit-learn
    path = synthetic.write_letor(data, tmp_path, with_qid=True)
    features, labels, query_ids = load_svmlight_file(str(path), n_features=10, query_id=True, dtype=np.float32)
    # Then every value, label and query comes back as generated
    np.testing.assert_array_equal(features.toarray(), data.features)
    np.testing.assert_array_equal(labels, data.labels)
    np.testing.assert_array_equal(np.bincount(query_ids)[1:], np.diff(data.query_offsets))


def test_the_writer_keeps_document_order_across_blocks_formatted_on_several_threads(tmp_path, monkeypatch):
    # Given blocks of 7 documents formatted 3 at a time (more blocks than threads, a short last one)
    monkeypatch.setattr(synthetic, "_WRITE_BLOCK_DOCS", 7)
    monkeypatch.setattr(synthetic, "available_cores", lambda: 3)
    data = synthetic_search.generate(12, docs_per_query=6, num_features=10, seed=4)
    assert len(data.labels) > 3 * 7 * 2 and len(data.labels) % 7
    # When written and read back by scikit-learn
    path = synthetic.write_letor(data, tmp_path, with_qid=True)
    features, labels, query_ids = load_svmlight_file(str(path), n_features=10, query_id=True, dtype=np.float32)
    # Then every document is where the data has it
    np.testing.assert_array_equal(features.toarray(), data.features)
    np.testing.assert_array_equal(labels, data.labels)
    np.testing.assert_array_equal(np.bincount(query_ids)[1:], np.diff(data.query_offsets))
