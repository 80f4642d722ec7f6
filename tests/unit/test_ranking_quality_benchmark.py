"""The ranking-quality benchmark's CPU parts: the LETOR sample's held-out split and the table it records."""

from __future__ import annotations

import numpy as np
from benchmarks import ranking_quality
from benchmarks.time_to_model import Run
from ranker.data.channels import read_letor_file


def test_the_letor_sample_is_split_into_whole_training_and_test_queries_reproducibly(tmp_path, letor_sample_dir):
    original = read_letor_file(letor_sample_dir / "rank.train")
    train, test = ranking_quality.write_letor_sample(tmp_path / "first", letor_sample_dir)
    again, _ = ranking_quality.write_letor_sample(tmp_path / "second", letor_sample_dir)
    train_data, test_data = read_letor_file(train), read_letor_file(test)
    # Every query lands whole on one side: the sizes of both files' queries are the original's, a fifth held out
    assert sorted(np.diff(train_data.query_offsets).tolist() + np.diff(test_data.query_offsets).tolist()) == sorted(
        np.diff(original.query_offsets).tolist())
    assert test_data.num_queries == round(original.num_queries * 0.2)
    assert train.read_bytes() == again.read_bytes()


def test_the_table_holds_each_run_against_lightgbm_from_the_same_dataset():
    events = {"ingest start": 1.0, "ingest end": 2.0, "training start": 3.0, "training end": 9.0,
              "evaluation end": 9.5, "exit": 10.0}
    peer = Run("LightGBM lambdarank", 0, events, 0.80, note="500 rounds")
    trainer = Run("train_ddp.py, shipped defaults", 1, events, 0.795)
    args = type("Args", (), {"device": "cpu", "gpus": 1, "threads": 1})()
    body = ranking_quality.render({"search": [(trainer, "exports step 7 (epoch 1)"), (peer, peer.note)]},
                                  {"search": "a description"}, args, "a machine")
    assert "| search | train_ddp.py, shipped defaults | 0.7950 | -0.0050 | 10.0 | 6.0 | exports step 7 (epoch 1) |" in body
    assert "| search | LightGBM lambdarank | 0.8000 | +0.0000 |" in body
