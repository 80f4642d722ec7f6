"""The Lightning data module's batches: where a resumed run starts, how the ranks split evaluation, what it refuses."""

from __future__ import annotations

import lightning as L
import numpy as np
import pytest
import torch
from ranker.data.batches import DeviceQueries, QueryBatches
from ranker.data.channels import RankingData
from ranker.data.synthetic import generate
from ranker.lightning.datamodule import EvaluationBatches, RankingDataModule, StepAlignedBatches


@pytest.fixture(scope="module")
def queries() -> DeviceQueries:
    return DeviceQueries.from_data(generate(num_queries=20, docs_per_query=3, num_features=4, seed=1),
                                   torch.device("cpu"))


def test_an_iterator_starts_at_the_batch_of_the_steps_already_done(queries):
    # Given one rank's batches (5 steps an epoch) and the optimizer steps a trainer has done
    batches = QueryBatches(queries, batch_size=4, seed=7)
    steps_done = [0]
    aligned = StepAlignedBatches(batches, lambda: steps_done[0])
    two_epochs = [batch[0] for epoch in (0, 1) for batch in batches.epoch_batches(epoch)]
    # When Lightning asks for an iterator at the start of the run, and again after 8 steps (resumed mid-epoch 1)
    first = [batch[0] for batch in aligned]
    steps_done[0] = 8
    resumed = [batch[0] for batch in aligned]
    # Then the first serves epoch 0, the second the rest of epoch 1 from its 4th batch: what the run would have trained
    assert len(aligned) == 5 and len(first) == 5 and len(resumed) == 2
    for served, expected in zip(first + resumed, two_epochs[:5] + two_epochs[8:]):
        torch.testing.assert_close(served, expected)


def test_ranks_evaluate_every_query_exactly_once(queries):
    # Given 3 ranks and batches of 4 queries / When each rank lists the queries it scores
    scored = torch.cat([features for rank in range(3)
                        for features, _, _ in EvaluationBatches(queries, rank, world_size=3, batch_queries=4)])
    # Then together they score each query once, in order
    torch.testing.assert_close(scored, queries.features)


def test_a_split_with_fewer_queries_than_processes_is_refused_naming_it(tmp_path):
    # Given a test split without queries, on one process
    empty = RankingData(np.zeros((0, 3), np.float32), np.zeros(0, np.float32), np.zeros(1, np.int64))
    datamodule = RankingDataModule(generate(num_queries=8, docs_per_query=2, num_features=3),
                                   generate(num_queries=4, docs_per_query=2, num_features=3), empty, batch_size=2)
    datamodule.trainer = L.Trainer(accelerator="cpu", devices=1, logger=False, default_root_dir=tmp_path)
    # When the data module is set up / Then the error names the split, its size and the fix
    with pytest.raises(ValueError, match="test: 0 queries for 1 processes; give every process at least one query"):
        datamodule.setup("fit")
