"""A training channel sharded across hosts (ShardedByS3Key): each rank's batches of its own queries, what the ranks
agree on (real gloo ranks), and the files that cannot be sharded."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from ranker.data import sharded_channel
from ranker.data.batches import DeviceQueries, OwnQueryBatches, auto_batch_size
from ranker.data.convert import main as convert
from ranker.data.ranking_data import RankingData
from ranker.data.synthetic import generate, write_letor
from ranker.model.encoding import PiecewiseLinearEncoding
from ranker.model.losses import LOSSES

BATCH = 4


def own_queries(count: int, seed: int = 0) -> DeviceQueries:
    return DeviceQueries.from_data(generate(num_queries=count, docs_per_query=3, num_features=5, seed=seed),
                                   torch.device("cpu"))


def seen(batches: OwnQueryBatches, epoch: int, start_step: int = 0) -> list[list[float]]:
    """Per step, the queries a batch trains (each named by its first document's first feature)."""
    return [features[mask.any(dim=-1)][:, 0, 0].tolist()
            for features, _, mask in batches.epoch_batches(epoch, start_step)]


def test_every_rank_takes_the_agreed_steps_and_trains_each_of_its_queries_once_an_epoch():
    # Given three ranks holding 11, 4 and 6 queries of their own, and the steps the largest needs at 4 a batch
    counts = (11, 4, 6)
    steps = -(-max(counts) // BATCH)
    ranks = [OwnQueryBatches(own_queries(count, seed=rank), BATCH, steps, rank=rank, seed=7)
             for rank, count in enumerate(counts)]
    for epoch in (0, 1):
        for rank, batches in enumerate(ranks):
            # When a rank goes through an epoch
            trained = seen(batches, epoch)
            # Then it took the agreed steps, each of one shape, and trained every query of its own exactly once
            assert len(trained) == steps
            everything = sorted(first for step in trained for first in step)
            assert everything == sorted(batches.queries.features[:, 0, 0].tolist())
            # And a smaller part's batches are smaller, never empty while it has queries for every step
            assert max(len(step) for step in trained) - min(len(step) for step in trained) <= 1
            shapes = {tuple(features.shape) for features, _, _ in batches.epoch_batches(epoch)}
            assert shapes == {(BATCH, 3, 5)}


def test_the_order_is_each_ranks_own_and_new_every_epoch_and_a_resumed_epoch_continues_it():
    first, second = (OwnQueryBatches(own_queries(12), BATCH, 3, rank=rank, seed=7) for rank in (0, 1))
    assert seen(first, 0) != seen(second, 0)  # the same queries, ordered per rank
    assert seen(first, 0) != seen(first, 1)
    assert seen(first, 1, start_step=1) == seen(first, 1)[1:]


def test_queries_that_do_not_fit_the_agreed_steps_are_refused():
    with pytest.raises(ValueError, match="13 training queries do not fit 3 steps of 4"):
        OwnQueryBatches(own_queries(13), BATCH, 3)


@pytest.mark.parametrize("loss", sorted(LOSSES))
def test_a_batch_slot_without_documents_adds_no_loss_and_no_gradient(loss):
    # Given a batch of two real queries and two empty slots (their features are another query's, masked out)
    features, labels, mask = own_queries(4).gather(torch.arange(4))
    scores = torch.randn(4, 3, requires_grad=True)
    padded_mask = mask.clone()
    padded_mask[2:] = False
    # When the loss is taken over the padded batch and over the real queries alone
    padded = LOSSES[loss](scores, labels, padded_mask)
    padded.backward()
    real = LOSSES[loss](scores.detach()[:2], labels[:2], mask[:2])
    # Then the two agree and the empty slots get no gradient
    torch.testing.assert_close(padded.detach(), real)
    assert torch.count_nonzero(scores.grad[2:]) == 0


def test_files_that_cannot_be_sharded_are_refused_naming_the_fix(tmp_path):
    data = generate(num_queries=6, docs_per_query=2, num_features=3)
    with_group_file = tmp_path / "grouped"
    write_letor(data, with_group_file)
    binary = tmp_path / "binary"
    convert(["--input", str(write_letor(data, tmp_path / "text", with_qid=True)), "--output", str(binary)])
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "README.md").write_text("the files went to the other host\n")
    with pytest.raises(ValueError, match=r"group files \['rank.train.query'\].*write a qid: column"):
        sharded_channel.host_share(with_group_file, None, 1)
    with pytest.raises(ValueError, match="binary shards.*keep a binary channel FullyReplicated"):
        sharded_channel.host_share(binary, None, 1)
    with pytest.raises(ValueError, match="gave this host none of the channel's LETOR files"):
        sharded_channel.host_share(empty, None, 1)


def test_a_hosts_ranks_split_its_share_into_contiguous_parts():
    share = generate(num_queries=7, docs_per_query=2, num_features=3)
    parts = [sharded_channel.rank_part(share, local_rank, 3) for local_rank in range(3)]
    assert [part.num_queries for part in parts] == [2, 2, 3]
    np.testing.assert_array_equal(np.concatenate([part.features for part in parts]), share.features)


# Three ranks' parts of one channel: different sizes and widths (the widest file of any host sets the width).
PART_QUERIES = (30, 9, 17)
PART_WIDTHS = (6, 4, 5)


def part_of(rank: int) -> RankingData:
    return generate(num_queries=PART_QUERIES[rank], docs_per_query=4, num_features=PART_WIDTHS[rank], seed=rank)


def agree_rank(rank: int, world_size: int, store: str, results: str, sample_rows: int) -> None:
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world_size)
    agreed = sharded_channel.agree(part_of(rank), num_features=None, requested_batch_size=0,
                                   sample_rows=sample_rows, rank=rank, world_size=world_size, seed=3)
    torch.save(agreed, Path(results) / f"rank{rank}.pt")
    dist.destroy_process_group()


@pytest.fixture(scope="module", params=[10_000, 120], ids=["every row", "a sample"])
def agreements(request, tmp_path_factory) -> tuple[int, list[sharded_channel.Agreement]]:
    folder = tmp_path_factory.mktemp("agree")
    world_size = len(PART_QUERIES)
    # the ranks inherit the environment; set it for them only, so later tests in this process see the machine's
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OMP_NUM_THREADS", "1")
        mp.spawn(agree_rank, args=(world_size, str(folder / "store"), str(folder), request.param),
                 nprocs=world_size, join=True)
    return request.param, [torch.load(folder / f"rank{rank}.pt", weights_only=False) for rank in range(world_size)]


def test_the_ranks_agree_on_the_whole_channels_width_batches_and_encoding_rows(agreements):
    sample_rows, results = agreements
    # Then every rank holds the same numbers, taken from every rank's part
    first = results[0]
    for other in results[1:]:
        assert (other.num_features, other.batch_size, other.steps_per_epoch, other.queries_per_rank) == (
            first.num_features, first.batch_size, first.steps_per_epoch, first.queries_per_rank)
        np.testing.assert_array_equal(other.encoding_rows, first.encoding_rows)
    assert first.num_features == max(PART_WIDTHS) and first.queries_per_rank == PART_QUERIES
    assert first.batch_size == auto_batch_size(sum(PART_QUERIES) // len(PART_QUERIES))
    assert first.steps_per_epoch == -(-max(PART_QUERIES) // first.batch_size)
    documents = sum(PART_QUERIES) * 4
    if sample_rows >= documents:
        # And below the sample's size the encoding rows are every row of the channel: the encoding fitted on them is
        # the one the whole channel, held by one process, gives
        whole = np.concatenate([np.pad(part_of(rank).features, ((0, 0), (0, max(PART_WIDTHS) - PART_WIDTHS[rank])))
                                for rank in range(len(PART_QUERIES))])
        fitted = PiecewiseLinearEncoding(max(PART_WIDTHS), 8).fit(first.encoding_rows)
        reference = PiecewiseLinearEncoding(max(PART_WIDTHS), 8).fit(whole)
        torch.testing.assert_close(fitted.lower_edges, reference.lower_edges)
    else:
        # Else each rank sent its share of the sample, in proportion to its documents
        assert len(first.encoding_rows) == pytest.approx(sample_rows, abs=len(PART_QUERIES))
