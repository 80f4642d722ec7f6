"""The ranking-quality benchmark's CPU parts: the LETOR sample's held-out split, the LightGBM peer trained to
convergence, and the tables it records."""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest
from benchmarks.ranking import ranking_quality
from benchmarks.baselines.lightgbm_lambdarank import QueryNdcg
from benchmarks.harness.models import SHIPPED_MODEL, model_line
from benchmarks.ranking.time_to_model import Run, held_out_ndcg_at_10, run_lightgbm, validation_curve
from ranker.config import DataConfig, TrainConfig
from ranker.data.channels import read_letor_file, split_queries


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


def test_the_table_holds_each_run_against_lightgbm_from_the_same_dataset_with_its_curve():
    events = {"ingest start": 1.0, "ingest end": 2.0, "training start": 3.0, "training end": 9.0,
              "evaluation end": 9.5, "exit": 10.0}
    peer = Run("LightGBM lambdarank", 0, events, 0.80, note="early stopping",
               curve=[(3.5, 0.70), (4.5, 0.78), (6.0, 0.78), (7.0, 0.75)])
    trainer = Run("train_ddp.py, shipped defaults", 1, events, 0.795, curve=[(5.0, 0.72), (8.0, 0.79)],
                  phase_marks={"imported": 1.5, "first step": 3.2, "trained": 9.0, "exported": 9.7})
    args = type("Args", (), {"device": "cpu", "gpus": 1, "threads": 1, "lightgbm_patience": 50,
                             "lightgbm_rounds": 5000, "patience_replay": []})()
    body = ranking_quality.render({"search": [(trainer, "exports step 7 (epoch 1)"), (peer, peer.note)]},
                                  {"search": "a description"}, args, "a machine")
    # Each run's test NDCG@10 against LightGBM's, its best validation and when it was reached (a tie keeps the
    # earlier round), launch to model and training, and an entry point's fixed cost from its timeline: launch to the
    # first step (3.2 s) plus the last step to the model exported (0.7 s)
    assert ("| search | train_ddp.py, shipped defaults | 0.7950 | -0.0050 | 0.7900 | 8.0 | 10.0 | 6.0 | 3.9 | "
            "exports step 7 (epoch 1) |") in body
    assert ("| search | LightGBM lambdarank | 0.8000 | +0.0000 | 0.7800 | 4.5 | 10.0 | 6.0 | - | early stopping |"
            in body)
    # And the curve: the best validation by doubling times since launch, to past the longest run
    assert "| search | 2 s | 4 s | 8 s | 16 s |" in body
    assert "| train_ddp.py, shipped defaults | - | - | 0.7900 | 0.7900 |" in body
    assert "| LightGBM lambdarank | - | 0.7000 | 0.7800 | 0.7800 |" in body
    assert "stopped after 50 rounds without a better NDCG@10 on their validation queries (at most 5,000)" in body
    # And the model the trainers ran, as the code ships it for the device the table was measured on
    assert (f"{model_line([SHIPPED_MODEL])}\n- The trainers' shipped defaults on CPU: width 128, the batch chosen from "
            "the queries, up to 30 epochs, early stopping after 5 validations") in body
    args.device = "cuda"
    body = ranking_quality.render({"search": [(trainer, "")]}, {"search": ""}, args, "a machine")
    assert ("- The trainers' shipped defaults on GPU: width 2048, 32 queries a step, up to 100 epochs, early stopping "
            "after 10 validations") in body


def test_each_patience_is_replayed_on_a_run_trained_without_early_stopping():
    # Given a run's validation curve over 6 epochs: best at 2, a tie at 3, best again at 5
    run = Run("train_ddp.py, shipped defaults but `--early-stopping 0`", 1, {"exit": 20.0}, 0.8,
              curve=[(2.0, 0.70), (4.0, 0.75), (6.0, 0.75), (8.0, 0.74), (10.0, 0.76), (12.0, 0.72)])
    # Then each patience stops at the validation that spends it and exports the best before it; a patience the run never
    # spends ends at the cap
    assert ranking_quality.patience_replay(run, [1, 2, 3]) == [
        ["1", "3", "2", "0.7500", "6.0"],
        ["2", "4", "2", "0.7500", "8.0"],
        ["3", "never (the cap)", "5", "0.7600", "-"]]


def test_the_validation_curve_is_read_from_the_epochs_and_rounds_a_run_logged():
    epochs = [(1.0, "ingest: rank.train ... in 0.5s"),
              (2.0, "epoch=1 step=50 train_loss=0.4 learning_rate=0.002 samples_per_second=1000"),
              (3.0, "epoch=1 step=50 val_loss=0.4 val_ndcg@10=0.79"),
              (5.0, "epoch=2 step=100 val_loss=0.3 val_ndcg@10=0.81")]
    # An entry point's final line repeats an epoch's validation: no point of its own
    assert validation_curve([*epochs, (6.0, "epoch=3 step=150 val_ndcg@10=0.81 test_ndcg@10=0.8")]) == [(3.0, 0.79),
                                                                                                  (5.0, 0.81)]
    # Unless it beats every logged epoch: then the exported weights are the last epoch's, which logs no line
    assert validation_curve([*epochs, (6.0, "epoch=3 step=150 val_ndcg@10=0.82 test_ndcg@10=0.8")])[-1] == (6.0, 0.82)
    rounds = [(7.0, "lightgbm: round=1 val_ndcg@10=0.750000"), (7.5, "lightgbm: round=2 val_ndcg@10=0.760000"),
              (8.0, "lightgbm: best round=2")]
    assert validation_curve(rounds) == [(7.0, 0.75), (7.5, 0.76)]


def test_lightgbm_validation_ndcg_is_the_entry_points_metric():
    # Given queries of 1 to 14 documents with tied scores and a query without any relevant document
    generator = np.random.default_rng(3)
    offsets = np.concatenate([[0], np.cumsum(generator.integers(1, 15, size=40))])
    labels = generator.integers(0, 5, size=offsets[-1]).astype(np.float32)
    labels[offsets[0]:offsets[1]] = 0
    scores = generator.integers(0, 4, size=offsets[-1]).astype(np.float32)
    # Then LightGBM's stopping metric (NumPy, its process holds no torch) is the entry points' NDCG@10
    assert QueryNdcg(labels, offsets)(scores) == pytest.approx(held_out_ndcg_at_10(scores, labels, offsets), abs=1e-6)


@pytest.fixture(scope="module")
def lightgbm_peer():
    pytest.importorskip("lightgbm", reason="the benchmark-only peer: pip install -r "
                                           "benchmarks/ranking/requirements-ranking-quality.txt")


def test_lightgbm_stops_a_patience_after_its_best_validation_round_and_exports_that_round(lightgbm_peer, tmp_path,
                                                                                       letor_sample_dir):
    import lightgbm

    train, test = ranking_quality.write_letor_sample(tmp_path / "data", letor_sample_dir)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    # Given LightGBM with a patience of 5 rounds and a cap it does not reach on this sample
    run = run_lightgbm(train, test, 1000, tmp_path, env, threads=1, name="peer", early_stopping=5)
    # Then it stopped 5 rounds after the first round no later one beat
    rounds = [score for _, score in run.curve]
    best_round = rounds.index(max(rounds)) + 1
    assert len(rounds) == best_round + 5 < 1000
    assert all(score <= rounds[best_round - 1] for score in rounds[best_round:])
    assert f"after {len(rounds)} rounds, best round {best_round}" in run.note
    # And the model it saved is that round's, scored on the entry points' own validation queries (the same split) with
    # their metric as the log says, and on the test file as the table says
    booster = lightgbm.Booster(model_file=str(tmp_path / "peer" / "lightgbm.txt"))
    assert booster.num_trees() == best_round
    defaults = {field.name: field.default for config in (DataConfig, TrainConfig) for field in dataclasses.fields(config)}
    _, validation = split_queries(read_letor_file(train), defaults["validation_fraction"], defaults["seed"])
    assert held_out_ndcg_at_10(booster.predict(validation.features), validation.labels,
                               validation.query_offsets) == pytest.approx(rounds[best_round - 1], abs=1e-5)
    held_out = read_letor_file(test)
    assert held_out_ndcg_at_10(booster.predict(held_out.features), held_out.labels,
                               held_out.query_offsets) == pytest.approx(run.ndcg_at_10, abs=1e-6)


def test_lightgbm_honours_its_round_cap_while_validation_still_improves(lightgbm_peer, tmp_path, letor_sample_dir):
    train, test = ranking_quality.write_letor_sample(tmp_path / "data", letor_sample_dir)
    # Given a cap far below what the patience would allow
    run = run_lightgbm(train, test, 4, tmp_path, {**os.environ}, threads=1, name="peer", early_stopping=50)
    # Then it trained exactly the cap's rounds
    assert len(run.curve) == 4
    assert "(patience 50, cap 4) after 4 rounds" in run.note


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


def test_lightgbm_runs_before_the_trainers_and_its_row_stays_last(tmp_path, monkeypatch):
    # The peer first, so that a call cut short by a machine's time limit keeps what every row is compared with
    launched = []

    def trainer(entry_point, gpus, train, test, epochs, work, env, flags=(), name=None):
        launched.append(name)
        (work / f"{name}-{gpus}" / "model").mkdir(parents=True)
        (work / f"{name}-{gpus}" / "model" / "metrics.json").write_text('{"exported_step": 7, "exported_epoch": 1}')
        return Run(entry_point, gpus, {"exit": 1.0}, 0.8)

    def peer(train, test, rounds, work, env, threads=None, name="lightgbm", early_stopping=0, python=None):
        launched.append(name)
        return Run("LightGBM lambdarank", 0, {"exit": 1.0}, 0.7, note="early stopping")

    monkeypatch.setattr(ranking_quality, "run_project", trainer)
    monkeypatch.setattr(ranking_quality, "run_lightgbm", peer)
    args = type("Args", (), {"runs": ["native", "lightning", "lightgbm"], "variants": [("native", ("--bins", "8"))],
                             "gpus": 1, "lightgbm_rounds": 5000, "threads": None, "lightgbm_patience": 50,
                             "lightgbm_python": "python3"})()
    results = ranking_quality.run_dataset("search", tmp_path / "train", tmp_path / "test", args, tmp_path, {})
    assert launched == ["search-lightgbm", "search-native", "search-lightning", "search-variant-bins-8"]
    assert [run.name for run, _ in results] == ["train_ddp.py, shipped defaults", "train_lightning.py, shipped defaults",
                                                "train_ddp.py, shipped defaults but `--bins 8`", "LightGBM lambdarank"]
