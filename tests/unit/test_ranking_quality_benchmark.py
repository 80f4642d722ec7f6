"""The ranking-quality benchmark's CPU parts: the LETOR sample's held-out split and the table it records."""

from __future__ import annotations

import numpy as np
import pytest
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


def test_a_resumed_call_reuses_data_written_from_the_same_recipe_and_rewrites_it_for_another(tmp_path,
                                                                                             letor_sample_dir):
    folder = tmp_path / "letor-sample"
    recipe = {"dataset": "letor-sample", "sample": str(letor_sample_dir)}
    train, test = ranking_quality.written_data(folder, recipe,
                                               lambda: ranking_quality.write_letor_sample(folder, letor_sample_dir))
    (folder / "results").mkdir()
    (folder / "results" / "native-1.json").write_text("{}")

    def must_not_write():
        raise AssertionError("the data of the same recipe was written again")

    # The same recipe: the files already there, untouched, and the recorded runs kept
    assert ranking_quality.written_data(folder, recipe, must_not_write) == (train, test)
    assert (folder / "results" / "native-1.json").exists()
    # The same recipe without its files (records carried to another machine): written again, the records kept
    train.unlink()
    rewritten = []
    ranking_quality.written_data(folder, recipe,
                                 lambda: rewritten.append(1) or ranking_quality.write_letor_sample(folder,
                                                                                                  letor_sample_dir))
    assert rewritten == [1] and train.exists()
    assert (folder / "results" / "native-1.json").exists()
    # Another recipe: written afresh, and the runs recorded on the old files forgotten
    rewritten = []
    ranking_quality.written_data(folder, {**recipe, "sample": "elsewhere"},
                                 lambda: rewritten.append(1) or ranking_quality.write_letor_sample(folder,
                                                                                                  letor_sample_dir))
    assert rewritten == [1]
    assert not (folder / "results").exists()


def test_a_finished_run_is_read_back_from_its_record_and_a_failed_one_is_launched_again(tmp_path):
    record = tmp_path / "results" / "lightgbm-1.json"
    finished = Run("LightGBM lambdarank", 0, {"ingest start": 0.5, "exit": 10.0}, 0.8, note="500 rounds")
    assert ranking_quality.recorded(record, lambda: (finished, finished.note)) == (finished, "500 rounds")

    def must_not_launch():
        raise AssertionError("a recorded run was launched again")

    again, note = ranking_quality.recorded(record, must_not_launch)
    assert again == finished
    assert note.startswith("500 rounds; recorded by an earlier call, 20")
    failed_record, launches = tmp_path / "results" / "native-1.json", []
    for _ in range(2):
        ranking_quality.recorded(failed_record, lambda: launches.append(1) or (Run("native", 1), "failed"))
    assert launches == [1, 1] and not failed_record.exists()


def test_a_variant_becomes_the_flags_it_changes_and_a_malformed_one_names_the_fix():
    assert ranking_quality.variant_flags("bins=8, loss=graded_listwise") == ("native", ("--bins", "8", "--loss",
                                                                                      "graded_listwise"))
    assert ranking_quality.variant_flags("lightning:batch-size=32") == ("lightning", ("--batch-size", "32"))
    with pytest.raises(ValueError, match=r"--variants: 'torchrun' is not an entry point; prefix a variant with one "
                                         r"of native:, lightning: or with none"):
        ranking_quality.variant_flags("torchrun:bins=8")
    with pytest.raises(ValueError, match=r"--variants: 'bins' is not flag=value; write e.g. bins=8"):
        ranking_quality.variant_flags("bins")
