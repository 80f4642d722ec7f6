"""The entry scripts as SageMaker runs them: real processes, gloo on CPU.

The runs are shared by the tests that compare them (module-scoped fixtures), so the whole file costs about a dozen
launches.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest
import torch
from ranker.data.channels import load_channel, split_queries
from ranker.log_format import parse_metrics
from ranker.model.export import load_scorer
from ranker.model.metrics import ndcg_per_query
from training_launch import (TINY_MODEL_FLAGS, TWO_RANKS, command, run_dirs, run_script, script_env,
                             start_mpirun_ranks)

pytestmark = pytest.mark.slow

# TWO_RANKS' global batch on one rank.
ONE_RANK_SAME_GLOBAL_BATCH = ["--batch-size", "8", "--epochs", "3", "--loss", "pointwise", *TINY_MODEL_FLAGS]


def assert_same_weights(first: dict, second: dict, atol: float = 1e-5) -> None:
    assert first.keys() == second.keys()
    for name in first:
        torch.testing.assert_close(first[name], second[name], atol=atol, rtol=1e-4, msg=f"weights {name} differ")


@pytest.fixture(scope="module")
def channel_flags(synthetic_channel):
    return ["--train", str(synthetic_channel)]


@pytest.fixture(scope="module")
def runs(tmp_path_factory, channel_flags, two_rank_runs):
    """Each (script, processes) run once: 2 ranks x batch B (the session's two_rank_runs), and 1 rank x batch 2B."""
    results = {(script, 2): run for script, run in two_rank_runs.items()}
    for script in two_rank_runs:
        dirs = run_dirs(tmp_path_factory.mktemp(f"{script}-1"))
        results[script, 1] = (dirs, run_script(script, channel_flags + ONE_RANK_SAME_GLOBAL_BATCH + dirs.flags()))
    return results


@pytest.mark.parametrize("script", ["train_ddp.py", "train_lightning.py"])
def test_two_rank_torchrun_trains_and_writes_every_artifact(runs, script):
    dirs, result = runs[script, 2]
    # Then rank 0 alone printed metric lines, the last one with the final validation NDCG@10
    metric_lines = [line for line in result.stdout.splitlines() if parse_metrics(line)]
    assert len([line for line in metric_lines if "val_ndcg@10" in line]) == 4  # three epoch ends + the final line
    assert "val_ndcg@10" in parse_metrics(metric_lines[-1])
    # And the model folder holds weights, config, both serving exports and metrics; plots are in the output folder
    assert {p.name for p in dirs.model_dir.iterdir()} >= {"model.safetensors", "model_config.json", "model.pt",
                                                          "model.pt2", "metrics.json"}
    metrics = json.loads((dirs.model_dir / "metrics.json").read_text())
    assert {"train_loss", "val_ndcg@10"} <= metrics.keys()
    assert {p.name for p in dirs.output_dir.iterdir()} >= {"loss.png", "ndcg.png"}
    # And on CPU processes both the log and metrics.json say the run took the CPU's defaults
    assert result.stdout.splitlines().count("defaults: cpu (each flag's own)") == 1 and metrics["defaults"] == "cpu"


@pytest.mark.parametrize("script", ["train_ddp.py", "train_lightning.py"])
def test_two_ranks_with_batch_b_equal_one_rank_with_batch_2b(runs, script):
    assert_same_weights(runs[script, 2][0].weights(), runs[script, 1][0].weights())


@pytest.mark.parametrize("script", ["train_ddp.py", "train_lightning.py"])
def test_a_run_without_the_portable_export_writes_every_other_artifact(runs, script):
    # Given a run with --portable-export false (the one-rank runs: TINY_MODEL_FLAGS)
    dirs, _ = runs[script, 1]
    # Then its model folder holds what the two-rank run's holds, less model.pt2
    written = {path.name for path in dirs.model_dir.iterdir()}
    assert written == {path.name for path in runs[script, 2][0].model_dir.iterdir()} - {"model.pt2"}
    assert {path.name for path in dirs.output_dir.iterdir()} >= {"loss.png", "ndcg.png"}


def test_lightning_and_native_loops_agree(runs):
    assert_same_weights(runs["train_ddp.py", 1][0].weights(), runs["train_lightning.py", 1][0].weights())
    native = json.loads((runs["train_ddp.py", 1][0].model_dir / "metrics.json").read_text())
    lightning = json.loads((runs["train_lightning.py", 1][0].model_dir / "metrics.json").read_text())
    assert lightning["val_ndcg@10"] == pytest.approx(native["val_ndcg@10"], abs=1e-5)


def test_exported_scorer_and_torchscript_agree_with_the_run(runs, synthetic_channel):
    from ranker.data.channels import load_channel

    dirs = runs["train_ddp.py", 1][0]
    features = torch.from_numpy(load_channel(synthetic_channel).features[:20])
    scores = load_scorer(dirs.model_dir)(features)
    assert scores.shape == (20,) and torch.isfinite(scores).all()
    torch.testing.assert_close(torch.jit.load(str(dirs.model_dir / "model.pt"))(features), scores)


# Long enough (many tiny steps) that a SIGTERM lands mid-run; checkpoints every 40 steps. (A process killed outright
# resumes from the periodic checkpoint, which the same save_training_state writes: tests/reliability's rank killed
# under torchrun, and test_model_selection's native run resumed from an epoch end's checkpoint.)
RESUMABLE = ["--batch-size", "2", "--max-steps", "1200", "--checkpoint-every", "40", *TINY_MODEL_FLAGS,
             "--dropout", "0.2"]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, channel_flags):
    dirs = run_dirs(tmp_path_factory.mktemp("uninterrupted"))
    run_script("train_ddp.py", channel_flags + RESUMABLE + dirs.flags())
    return dirs


def start_and_wait_for_checkpoint(args: list[str], dirs) -> subprocess.Popen:
    process = subprocess.Popen(command("train_ddp.py", 1) + args, env=script_env(), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    while not any(dirs.checkpoint_dir.glob("step-*.pt")):
        assert process.poll() is None and time.monotonic() < deadline, "the run ended before its first checkpoint"
        time.sleep(0.01)
    return process


def test_sigterm_writes_a_checkpoint_then_a_second_run_finishes_identically(tmp_path, channel_flags, uninterrupted):
    # Given a run told to stop by SIGTERM (what SageMaker sends before a spot interruption), no metric line due
    # before its last step
    dirs = run_dirs(tmp_path)
    process = start_and_wait_for_checkpoint(channel_flags + RESUMABLE + ["--log-every", "1200"] + dirs.flags(), dirs)
    process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=60)
    # Then it exits cleanly after writing a checkpoint at the step it reached: training alone, it needs no agreement
    # with other ranks and does not wait for a metric line
    assert process.returncode == 0, output
    stopped_at = int(output.split("SIGTERM: checkpoint written at step ")[1].split(";")[0])
    assert stopped_at < 1200
    assert (dirs.checkpoint_dir / f"step-{stopped_at:09d}.pt").is_file()
    # When the job restarts, Then it finishes with the uninterrupted run's weights
    result = run_script("train_ddp.py", channel_flags + RESUMABLE + dirs.flags())
    assert f"at step {stopped_at}" in result.stdout
    assert_same_weights(dirs.weights(), uninterrupted.weights())


@pytest.mark.parametrize("script", ["train_ddp.py", "train_lightning.py"])
def test_ranks_started_with_mpirun_variables_train_together(tmp_path, channel_flags, runs, script):
    # Given two plain processes carrying what mpirun and SageMaker's toolkit set (no torchrun variables)
    dirs = run_dirs(tmp_path)
    processes = start_mpirun_ranks([sys.executable, script, *channel_flags, *TWO_RANKS, *dirs.flags()])
    outputs = [process.communicate(timeout=180)[0] for process in processes]
    assert [process.returncode for process in processes] == [0, 0], outputs
    # Then they formed one 2-rank group: the result equals the torchrun 2-rank run, and only rank 0 logged
    assert_same_weights(dirs.weights(), runs[script, 2][0].weights())
    assert "val_ndcg@10" in outputs[0] and "val_ndcg@10" not in outputs[1]


def test_default_run_on_letor_sample_beats_random_ranking_on_held_out_queries(tmp_path, letor_sample_dir):
    # Given the real LETOR sample and no flags but the directories and one epoch (whole queries are held out for
    # validation). The defaults' first epoch already clears the bar (NDCG@10 0.77; a second adds 0.006 and 1.7 s of
    # CPU); the default 30 epochs end by early stopping some nine epochs later with 0.79, a minute more of a loaded
    # machine that this test does not need (early stopping has its own tests, test_model_selection.py)
    dirs = run_dirs(tmp_path)
    result = run_script("train_ddp.py", ["--train", str(letor_sample_dir), "--epochs", "1", *dirs.flags()])
    # Then NDCG@10 on the held-out queries clears 0.72 (a random ranking scores about 0.65)
    final = parse_metrics(result.stdout.strip().splitlines()[-1])
    assert final["val_ndcg@10"] >= 0.72
    assert json.loads((dirs.model_dir / "metrics.json").read_text())["val_ndcg@10"] == pytest.approx(
        final["val_ndcg@10"], rel=1e-5)
    # And the exported scorer, on the same held-out queries (the split is by seed), measures what the run reported
    _, held_out = split_queries(load_channel(letor_sample_dir), fraction=0.2, seed=0)
    features, labels, mask = (torch.from_numpy(array) for array in held_out.padded())
    with torch.no_grad():
        scores = load_scorer(dirs.model_dir)(features)
    assert ndcg_per_query(scores, labels, mask, 10).mean().item() == pytest.approx(final["val_ndcg@10"], abs=1e-4)
