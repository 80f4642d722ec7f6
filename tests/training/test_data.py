"""The LETOR/SVMlight reader, binary shards, the query split and the queries padded on the device."""

from __future__ import annotations

import multiprocessing
import time

import numpy as np
import pytest
import torch
from ranker.data import channels as data
from ranker.data import convert, host_cache, shards, synthetic
from ranker.data.batches import DeviceQueries
from ranker.data.ranking_data import RankingData


def write(folder, name, text, groups=None):
    (folder / name).write_text(text)
    if groups is not None:
        (folder / f"{name}.query").write_text("".join(f"{size}\n" for size in groups))
    return folder / name


def test_missing_features_are_zero_and_indices_are_one_based(tmp_path):
    # Given rows that name different sparse features
    path = write(tmp_path, "rank.train", "2 qid:1 1:0.5 4:1.5\n0 qid:1 2:0.25\n")
    # When the file is read
    loaded = data.read_letor_file(path)
    # Then absent features are 0 and index 1 is column 0
    np.testing.assert_array_equal(loaded.features, [[0.5, 0, 0, 1.5], [0, 0.25, 0, 0]])
    np.testing.assert_array_equal(loaded.labels, [2, 0])


def test_rows_of_a_query_are_grouped_in_order_of_first_appearance(tmp_path):
    # Given qids that are neither sorted nor contiguous
    path = write(tmp_path, "rank.train", "1 qid:9 1:1\n2 qid:3 1:2\n3 qid:9 1:3\n4 qid:3 1:4\n0 qid:5 1:5\n")
    # When the file is read
    loaded = data.read_letor_file(path)
    # Then each query's rows are together, queries in the order they first appeared
    np.testing.assert_array_equal(loaded.query_offsets, [0, 2, 4, 5])
    np.testing.assert_array_equal(loaded.labels, [1, 3, 2, 4, 0])


def test_comments_and_blank_lines_are_skipped_and_group_file_is_used(tmp_path):
    # Given a file without qids, with comments and a blank line, and its .query group file
    path = write(tmp_path, "rank.train", "# header\n1 1:1 # doc a\n\n0 2:1\n3 1:0.5\n", groups=[2, 1])
    # When the file is read
    loaded = data.read_letor_file(path)
    # Then the groups come from the .query file
    np.testing.assert_array_equal(loaded.query_offsets, [0, 2, 3])
    np.testing.assert_array_equal(loaded.labels, [1, 0, 3])


def test_truncated_line_error_names_file_and_line(tmp_path):
    # Given a row cut off in the middle of a feature
    path = write(tmp_path, "rank.train", "1 qid:1 1:0.5\n# note\n0 qid:1 2:\n")
    # When it is read, Then the error names the file and the line
    with pytest.raises(ValueError, match=r"rank\.train:3: not a LETOR row"):
        data.read_letor_file(path)


def test_nan_error_names_file_and_line(tmp_path):
    path = write(tmp_path, "rank.train", "1 qid:1 1:0.5\n\n0 qid:1 2:nan\n")
    with pytest.raises(ValueError, match=r"rank\.train:3: NaN"):
        data.read_letor_file(path)


def test_group_file_that_does_not_match_the_rows_is_an_error(tmp_path):
    path = write(tmp_path, "rank.train", "1 1:1\n0 1:2\n", groups=[3])
    with pytest.raises(ValueError, match=r"add up to 3 rows but the data file has 2"):
        data.read_letor_file(path)


def test_empty_channel_is_an_error_naming_the_channel(tmp_path):
    (tmp_path / "README.md").write_text("not data\n")
    with pytest.raises(ValueError, match=f"channel {tmp_path}: no LETOR text files"):
        data.load_channel(tmp_path)


def test_channel_skips_non_data_files_and_reads_the_letor_sample(letor_sample_dir):
    # Given the real sample folder (with a README and a licence beside the data)
    loaded = data.load_channel(letor_sample_dir)
    # Then every row and query is read, features are the data's 300 columns
    assert (loaded.num_queries, len(loaded.labels), loaded.num_features) == (201, 3005, 300)


def test_split_holds_out_whole_queries(synthetic_channel):
    loaded = data.load_channel(synthetic_channel)
    train, validation = data.split_queries(loaded, 0.25, seed=0)
    assert (train.num_queries, validation.num_queries) == (48, 16)
    # No document is lost or duplicated: label multisets add up
    assert sorted(np.concatenate([train.labels, validation.labels])) == sorted(loaded.labels)


def test_converter_writes_shards_that_read_back_identically(synthetic_channel, tmp_path):
    # Given a text channel, When it is converted into several shards
    convert.main(["--input", str(synthetic_channel), "--output", str(tmp_path), "--docs-per-shard", "100"])
    manifest = shards.read_manifest(tmp_path)
    # Then there are several shards of whole queries, and reading them gives the same data
    assert len(manifest["shards"]) > 1
    original, converted = data.load_channel(synthetic_channel), data.load_channel(tmp_path)
    np.testing.assert_array_equal(original.features, converted.features)
    np.testing.assert_array_equal(original.query_offsets, converted.query_offsets)


@pytest.mark.parametrize("with_qid", [False, True])
def test_synthetic_generator_writes_a_channel_of_graded_whole_queries(tmp_path, with_qid):
    from ranker.data import synthetic

    # When the generator CLI writes 10 queries x 6 documents x 9 features
    synthetic.main(["--output", str(tmp_path), "--queries", "10", "--docs-per-query", "6", "--features", "9",
                    "--seed", "4", *(["--qid"] if with_qid else [])])
    # Then the folder reads back as a channel of that shape, labels graded 0-4, and a group file only without qids
    loaded = data.load_channel(tmp_path)
    assert (loaded.num_queries, len(loaded.labels)) == (10, 60)
    assert loaded.num_features <= 9 and set(np.unique(loaded.labels)) <= {0, 1, 2, 3, 4}
    assert (tmp_path / "rank.train.query").exists() != with_qid


def test_synthetic_seeds_sample_one_relevance_function():
    from ranker.data.synthetic import generate

    # Given data of two seeds (say a training and a validation channel)
    first, second = generate(200, 8, 12, seed=1), generate(200, 8, 12, seed=2)
    # When a linear readout is fitted on the first
    weights = np.linalg.lstsq(first.features, first.labels, rcond=None)[0]
    fit = np.corrcoef(second.features @ weights, second.labels)[0, 1]
    # Then it predicts the second's labels: one relevance function, not two
    assert fit > 0.3


def load_in_child(channel, results, counter, build_seconds=0.0):
    """A local rank: loads the channel as one of 2 on this host; records each parse it does in `counter`."""
    read = data._read_letor_files

    def counted_read(files, num_features):
        with open(counter, "a") as handle:
            handle.write("parse\n")
        time.sleep(build_seconds)
        return read(files, num_features)

    data._read_letor_files = counted_read
    loaded = data.load_channel(channel, local_ranks=2)
    np.savez(results, features=loaded.features, labels=loaded.labels, offsets=loaded.query_offsets)


@pytest.mark.slow  # starts processes
def test_local_ranks_parse_a_text_channel_once_per_host(synthetic_channel, tmp_path, monkeypatch):
    # Given two local ranks loading the same text channel at once
    monkeypatch.setenv(host_cache.CACHE_DIR_VARIABLE, str(tmp_path / "cache"))
    counter = tmp_path / "parses"
    context = multiprocessing.get_context("fork")
    ranks = [context.Process(target=load_in_child, args=(synthetic_channel, tmp_path / f"rank{rank}.npz", counter))
             for rank in range(2)]
    for rank in ranks:
        rank.start()
    for rank in ranks:
        rank.join(timeout=60)
        assert rank.exitcode == 0
    # Then one of them parsed it, and both hold the rows a lone process parses
    assert counter.read_text().splitlines() == ["parse"]
    expected = data.load_channel(synthetic_channel)
    for rank in range(2):
        loaded = np.load(tmp_path / f"rank{rank}.npz")
        np.testing.assert_array_equal(loaded["features"], expected.features)
        np.testing.assert_array_equal(loaded["labels"], expected.labels)
        np.testing.assert_array_equal(loaded["offsets"], expected.query_offsets)


def test_a_changed_file_is_parsed_again(tmp_path, monkeypatch):
    monkeypatch.setenv(host_cache.CACHE_DIR_VARIABLE, str(tmp_path / "cache"))
    path = write(tmp_path, "rank.train", "2 qid:1 1:0.5\n0 qid:1 2:0.25\n")
    assert data.load_channel(path, local_ranks=2).num_features == 2
    path.write_text("2 qid:1 1:0.5\n0 qid:1 3:0.25\n1 qid:2 1:1\n")
    reloaded = data.load_channel(path, local_ranks=2)
    assert reloaded.num_features == 3 and reloaded.num_queries == 2


@pytest.mark.slow  # starts a process
def test_a_rank_waiting_too_long_for_the_parsing_rank_names_the_file_and_the_fix(synthetic_channel, tmp_path,
                                                                                   monkeypatch):
    # Given a local rank whose parse takes longer than the others will wait
    monkeypatch.setenv(host_cache.CACHE_DIR_VARIABLE, str(tmp_path / "cache"))
    parsing = multiprocessing.get_context("fork").Process(
        target=load_in_child, args=(synthetic_channel, tmp_path / "rank0.npz", tmp_path / "parses", 5.0))
    parsing.start()
    try:
        while not (tmp_path / "parses").exists():
            time.sleep(0.05)
        monkeypatch.setattr(host_cache, "LOCK_TIMEOUT_S", 0.3)
        with pytest.raises(TimeoutError, match=r"another rank on this host to parse .*rank\.train.*ranker\.data\.convert"):
            data.load_channel(synthetic_channel, local_ranks=2)
    finally:
        parsing.join(timeout=30)


@pytest.mark.parametrize("max_docs", [None, 9])
def test_queries_padded_on_the_device_are_the_padded_layout_of_the_data(max_docs):
    # Given queries of different sizes, in read-only memory as a map of binary shards is
    generated = synthetic.generate(30, docs_per_query=4, num_features=5, seed=2, varied_sizes=True)
    rows = RankingData(generated.features.copy(), generated.labels.copy(), generated.query_offsets)
    rows.features.flags.writeable = False
    # When they are padded on the device
    queries = DeviceQueries.from_data(rows, torch.device("cpu"), max_docs)
    # Then every document sits where RankingData.padded puts it, and every padded slot is zero and masked out
    features, labels, mask = rows.padded(max_docs)
    assert torch.equal(queries.features, torch.from_numpy(features))
    assert torch.equal(queries.labels, torch.from_numpy(labels))
    assert torch.equal(queries.mask, torch.from_numpy(mask))


def test_a_channel_without_queries_pads_to_no_queries():
    empty = RankingData(np.zeros((0, 3), np.float32), np.zeros(0, np.float32), np.zeros(1, np.int64))
    queries = DeviceQueries.from_data(empty, torch.device("cpu"), 4)
    assert queries.features.shape == (0, 4, 3) and queries.num_queries == 0
