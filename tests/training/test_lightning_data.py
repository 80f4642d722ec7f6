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
from sagemaker_distributed.lightning import quiet_lightning_console


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


def test_a_cpu_scores_evaluation_batches_of_a_few_hundred_documents_on_one_thread_as_the_native_loop(tmp_path):
    from ranker.config import ModelConfig, TrainConfig
    from ranker.lightning.module import RankingModule
    from ranker.training.engine import CPU_EVALUATION_DOCUMENTS

    class Seen(L.Callback):
        def __init__(self):
            self.batches: list[tuple[int, int]] = []
            """(documents in the padded batch, torch's threads) of each evaluation batch."""

        def on_validation_batch_start(self, trainer, module, batch, *args) -> None:
            self.batches.append((batch[0].shape[0] * batch[0].shape[1], torch.get_num_threads()))

        on_test_batch_start = on_validation_batch_start

    # Given validation and test queries of 50 documents, torch on two threads, Lightning's console as the entry point
    # quiets it
    quiet_lightning_console()
    split = generate(num_queries=30, docs_per_query=50, num_features=4, seed=2)
    datamodule = RankingDataModule(split, split, split, batch_size=4)
    seen = Seen()
    trainer = L.Trainer(accelerator="cpu", devices=1, logger=False, enable_checkpointing=False, callbacks=[seen],
                        enable_model_summary=False, enable_progress_bar=False, default_root_dir=tmp_path)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        # When Lightning validates and tests the module on the CPU
        module = RankingModule(ModelConfig(num_features=4, width=8, num_layers=2), TrainConfig())
        trainer.validate(module, datamodule=datamodule, verbose=False)
        trainer.test(module, datamodule=datamodule, verbose=False)
        # Then each split comes in several batches of at most CPU_EVALUATION_DOCUMENTS documents, each scored with
        # torch on one thread, and torch has its two threads again after each loop
        assert len(seen.batches) > 2
        assert all(documents <= CPU_EVALUATION_DOCUMENTS and on == 1 for documents, on in seen.batches)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)
