"""Streaming batches from binary shards, and the benchmark harness over the training hot path."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from ranker.config import TrainConfig
from ranker.data import channels as data
from ranker.data import shards
from ranker.data.batches import epoch_permutation
from ranker.data.streaming import StreamingBatches
from sagemaker_distributed import detect_topology

from benchmarks.gpu.native_harness import NativeHarness, synthetic_session
from benchmarks.harness.models import PLAIN_MLP, benchmark_model


@pytest.fixture(scope="module")
def shard_dir(synthetic_channel, tmp_path_factory):
    folder = tmp_path_factory.mktemp("shards")
    shards.write_shards(data.load_channel(synthetic_channel), folder, docs_per_shard=120)  # 15 queries a shard
    return folder


def batch_rows(batches) -> list[tuple]:
    """Every real document served, as hashable (label, features) rows."""
    rows = []
    for features, labels, mask in batches:
        rows += [(float(label), tuple(row.tolist())) for row, label in zip(features[mask], labels[mask])]
    return rows


def test_each_rank_streams_only_its_own_shards_every_query_whole(shard_dir):
    # Given 5 shards and 2 ranks
    names = shards.read_manifest(shard_dir)["shards"]
    for rank in range(2):
        batches = StreamingBatches(shard_dir, batch_size=4, rank=rank, world_size=2, seed=0,
                                   device=torch.device("cpu"), prefetch=2)
        # When one epoch is read
        served = batch_rows(batches.epoch_batches(epoch=0))
        # Then every document served comes from this rank's shards, and whole queries came together
        own = [shards.open_shard(shard_dir, name) for name in names[rank::2]]
        own_rows = {(float(label), tuple(row.tolist()))
                    for shard in own for row, label in zip(shard.features, shard.labels)}
        assert set(served) <= own_rows
        assert len(served) == batches.steps_per_epoch * 4 * 8  # 8 documents per query, no padding served


def test_streaming_chooses_the_batch_from_the_smallest_ranks_queries_with_batch_size_0(shard_dir):
    # 5 shards of 15 queries on 2 ranks, 30 queries on the smaller one: 16 per step, one step an epoch
    batches = [StreamingBatches(shard_dir, 0, rank, 2, seed=0, device=torch.device("cpu")) for rank in (0, 1)]
    assert [b.batch_size for b in batches] == [16, 16] and [b.steps_per_epoch for b in batches] == [1, 1]
    features, _, _ = next(iter(batches[1].epoch_batches(0)))
    assert features.shape[0] == 16


@pytest.mark.parametrize("threads", [1, 3])
def test_streaming_order_is_deterministic_by_seed_and_epoch_and_resumes_mid_epoch(shard_dir, threads):
    make = lambda: StreamingBatches(shard_dir, 4, 0, 1, seed=5, device=torch.device("cpu"),  # noqa: E731
                                    prefetch=3, threads=threads)
    first, again = batch_rows(make().epoch_batches(1)), batch_rows(make().epoch_batches(1))
    assert first == again
    assert first != batch_rows(make().epoch_batches(2))
    # Resuming at step 3 serves exactly the rest of the epoch
    assert batch_rows(make().epoch_batches(1, start_step=3)) == first[3 * 4 * 8:]
    # And the thread count changes nothing but speed: one thread serves the same batches in the same order
    single = StreamingBatches(shard_dir, 4, 0, 1, seed=5, device=torch.device("cpu"), threads=1)
    assert batch_rows(single.epoch_batches(1)) == first


def test_abandoning_an_epoch_stops_the_prefetch_threads(shard_dir):
    batches = StreamingBatches(shard_dir, 4, 0, 1, 0, torch.device("cpu"), prefetch=2, threads=3)
    iterator = batches.epoch_batches(0)
    next(iterator)
    iterator.close()  # the generator's cleanup joins the worker; a hang here fails the test by timeout
    assert not any(thread.name == "streaming-batches" for thread in __import__("threading").enumerate())


@pytest.mark.slow
def test_harness_runs_exactly_the_steps_asked_and_learns(tmp_path):
    # Given the GPU benchmark's plain MLP, small, on synthetic data, built the way the benchmark builds it (the
    # shipped model's per-feature embeddings would only make each CPU step slower: the harness is the same)
    session = synthetic_session(benchmark_model(PLAIN_MLP, width=32),
                                TrainConfig(batch_size=8, learning_rate=3e-3), detect_topology({}),
                                torch.device("cpu"), docs_per_query=8, work_dir=tmp_path)
    harness = NativeHarness.build(session, total_steps=200)
    seen = []
    # When it runs across several epochs of its data
    first = harness.run(steps=10, on_step=lambda: seen.append(1)).item() / 10
    harness.run(steps=80)
    last = harness.run(steps=10).item() / 10
    # Then every step called back, the schedule advanced by each step, and the loss went down
    assert len(seen) == 10 and harness.scheduler.last_epoch == 100
    assert last < first


def test_queries_of_different_lengths_stream_exactly_as_the_padded_in_memory_queries(tmp_path):
    # Given queries of 1 to 9 documents (padded to 9), spread over several shards, log1p on
    generator = np.random.default_rng(3)
    lengths = generator.integers(1, 10, size=40)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    ranking = data.RankingData(generator.random((offsets[-1], 5), dtype=np.float32) * 10,
                               generator.integers(0, 5, offsets[-1]).astype(np.float32), offsets)
    shards.write_shards(ranking, tmp_path, docs_per_shard=50)
    padded_features, padded_labels, padded_mask = ranking.padded(9)
    batches = StreamingBatches(tmp_path, batch_size=6, rank=0, world_size=1, seed=2, device=torch.device("cpu"),
                               log1p=True)
    # When an epoch is streamed
    order = batches.local_queries[epoch_permutation(len(batches.local_queries), 2, 0).numpy()]
    first_query = np.cumsum([0] + [shard.num_queries for shard in batches.shards])
    for step, (features, labels, mask) in enumerate(batches.epoch_batches(epoch=0)):
        # Then slot i holds query i of the epoch's order, rows and padding exactly as the in-memory layout has them
        queries = [first_query[s] + q for s, q in order[step * 6:(step + 1) * 6]]
        np.testing.assert_allclose(features.numpy(), np.log1p(padded_features[queries]), rtol=1e-6)
        np.testing.assert_array_equal(labels.numpy(), padded_labels[queries])
        np.testing.assert_array_equal(mask.numpy(), padded_mask[queries])
