"""`--batch-size 0`: the batch chosen from the training queries, the same global batch on any process count."""

from __future__ import annotations

import numpy as np
import torch
from ranker.data.batches import DeviceQueries, QueryBatches, auto_batch_size


def queries(count: int) -> DeviceQueries:
    return DeviceQueries(torch.zeros(count, 2, 3), torch.zeros(count, 2), torch.ones(count, 2, dtype=torch.bool))


def test_small_channels_get_16_queries_per_step_and_larger_ones_double_it_while_an_epoch_keeps_60_steps():
    # 16 up to the count where 32 still leaves 60 steps; never more queries than the channel has
    assert [auto_batch_size(count) for count in (10, 800, 1_919, 1_920, 7_679, 7_680, 8_000, 16_000)] == [
        10, 16, 16, 32, 64, 128, 128, 256]
    for count in (1, 800, 8_000, 25_000, 1_000_000):
        batch = auto_batch_size(count)
        assert count // batch >= min(60, count // 16) and (batch == 16 or count // (2 * batch) < 60)


def test_two_processes_choosing_their_batch_take_the_global_batch_of_one(capsys):
    one = QueryBatches(queries(16_000), 0)
    ranks = [QueryBatches(queries(16_000), 0, rank=rank, world_size=2) for rank in (0, 1)]
    assert one.batch_size == 256 and [batches.batch_size for batches in ranks] == [128, 128]
    assert one.steps_per_epoch == ranks[0].steps_per_epoch == 62
    # Rank 1's queries of a step are the second half of one process's batch: the same queries, split
    for step in (0, 61):
        together = one.rank_indices(3)[step]
        split = torch.cat([batches.rank_indices(3)[step] for batches in ranks])
        np.testing.assert_array_equal(together.numpy(), split.numpy())
    # What was chosen is printed once, by rank 0
    printed = capsys.readouterr().out.splitlines()
    assert printed == ["batch size: 256 queries per step per process (--batch-size 0: chosen for 16,000 training "
                       "queries per process)",
                       "batch size: 128 queries per step per process (--batch-size 0: chosen for 8,000 training "
                       "queries per process)"]


def test_a_batch_size_given_is_taken_as_it_is(capsys):
    assert QueryBatches(queries(16_000), 8).batch_size == 8
    assert capsys.readouterr().out == ""
