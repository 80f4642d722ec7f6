"""`--batch-size 0`: the batch chosen from the training queries, the same global batch on any process count."""

from __future__ import annotations

import numpy as np
import torch
from ranker.data.batches import DeviceQueries, QueryBatches, auto_batch_size


def queries(count: int) -> DeviceQueries:
    return DeviceQueries(torch.zeros(count, 2, 3), torch.zeros(count, 2), torch.ones(count, 2, dtype=torch.bool))


def test_small_channels_get_16_queries_per_step_and_larger_ones_double_it_while_an_epoch_keeps_250_steps():
    # 16 up to the count where 32 still leaves 250 steps; never more queries than the channel has
    assert [auto_batch_size(count) for count in (10, 800, 7_999, 8_000, 16_000, 31_999, 32_000)] == [
        10, 16, 16, 32, 64, 64, 128]
    for count in (1, 800, 8_000, 25_000, 1_000_000):
        batch = auto_batch_size(count)
        assert count // batch >= min(250, count // 16) and (batch == 16 or count // (2 * batch) < 250)


def test_two_processes_choosing_their_batch_take_the_global_batch_of_one(capsys):
    one = QueryBatches(queries(16_000), 0)
    ranks = [QueryBatches(queries(16_000), 0, rank=rank, world_size=2) for rank in (0, 1)]
    assert one.batch_size == 64 and [batches.batch_size for batches in ranks] == [32, 32]
    assert one.steps_per_epoch == ranks[0].steps_per_epoch == 250
    # Rank 1's queries of a step are the second half of one process's batch: the same queries, split
    for step in (0, 249):
        together = one.rank_indices(3)[step]
        split = torch.cat([batches.rank_indices(3)[step] for batches in ranks])
        np.testing.assert_array_equal(together.numpy(), split.numpy())
    # What was chosen is printed once, by rank 0
    printed = capsys.readouterr().out.splitlines()
    assert printed == ["batch size: 64 queries per step per process (--batch-size 0: chosen for 16,000 training "
                       "queries per process)",
                       "batch size: 32 queries per step per process (--batch-size 0: chosen for 8,000 training "
                       "queries per process)"]


def test_a_batch_size_given_is_taken_as_it_is(capsys):
    assert QueryBatches(queries(16_000), 8).batch_size == 8
    assert capsys.readouterr().out == ""
