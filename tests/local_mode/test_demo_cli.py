"""`python -m local_mode` as `make demo` runs it, read as its user reads it: the screen and what the run leaves in its
work dir. A refused run (run as a process of its own, so that its first screen is the command's own), a script of the
user's own, and a tuning job whose trials run side by side.

Each run synthesizes the stack as `cdk synth -c distribution=...` would: the refused run and the tuning job keep the
default distribution, as test_demo's run of the demo's defaults does, so that the three share one synthesis (local mode
caches it by context)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from small_model import SMALL_MODEL

from local_mode.cli import main
from local_mode.demo import KEPT_RUNS, NO_DATA_FILE
from local_mode.aws.synthesized_app import PROJECT_ROOT

pytestmark = pytest.mark.slow

# jsii's Node end-of-life banner, which it prints as the repr of each line's bytes.
BANNER = re.compile(r"^b'|end-of-life", re.MULTILINE)
SUMMARY_LINE = re.compile(r"^(?P<label>[a-z][a-zA-Z0-9@ ]*):\s+(?P<value>.*)$", re.MULTILINE)


def summary_fields(printed: str) -> dict[str, str]:
    """The summary's `label:   value` lines (the last of each label); the jobs' log lines start with `[`."""
    return {match["label"]: match["value"] for match in SUMMARY_LINE.finditer(printed)}


def test_a_refused_run_shows_the_refusal_without_a_banner_and_leaves_nothing_behind(tmp_path):
    # Given a work dir holding an earlier run, and a shell without the Makefile's settings
    earlier = tmp_path / "run-20000101-000000-earlier"
    (earlier / "jobs" / "ranker-earlier-job").mkdir(parents=True)
    env = {name: value for name, value in os.environ.items() if not name.startswith("JSII_SILENCE_")}

    # When the demo runs with a tuning range the trigger refuses (its minimum above its maximum)
    result = subprocess.run([sys.executable, "-m", "local_mode", "--queries", "8",
                             "--tune", "learning-rate=continuous:0.5:0.1", "--work-dir", str(tmp_path)],
                            cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=600)

    # Then it exits 1 with the trigger's reason, and prints no banner and no raw bytes
    printed = result.stdout + result.stderr
    assert result.returncode == 1, printed[-3000:]
    assert "min=0.5 is not below max=0.1" in printed
    assert not BANNER.findall(printed), printed[:3000]
    # And the run left nothing behind: its generated data is gone, the earlier run is untouched
    assert [path.name for path in tmp_path.iterdir()] == [earlier.name]


def test_a_script_of_your_own_gets_a_summary_a_job_name_and_data_of_its_own(tmp_path, capsys):
    # Given Lightning's BoringModel from its own folder: it reads no data, saves only its weights and prints no line
    # that the stack's default metric definitions (the ranker's) read
    # When the demo runs it
    exit_code = main(["--source-dir", str(PROJECT_ROOT / "examples" / "lightning-boring-model"),
                      "--entry-point", "train.py", "--distribution", "none", "--hyperparameter", "epochs=1",
                      "--work-dir", str(tmp_path)])

    # Then the job completed, named after the script's folder and file, not the demo's ranking dataset
    printed = capsys.readouterr().out
    fields = summary_fields(printed)
    assert exit_code == 0, printed[-3000:]
    assert fields["job"].startswith("ranker-lightning-boring-model-train-")
    # And the summary shows no ranking metric it never reported: its metrics line says it reported none
    assert "NDCG" not in printed
    assert fields["metrics"].startswith("none (no line of the job's log matched its metric definitions")
    # And its model is unpacked but not registered, for the serving handler it lacks
    assert fields["model"].endswith("/model/ (model.tar.gz unpacked)")
    assert fields["package"].startswith("not registered: ")
    assert "holds no code/inference.py" in fields["package"]
    # And nothing offers to score it with the ranker's command
    assert "next" not in fields
    # And its train channel held no generated ranking data: only the note saying how to give it data
    [run] = tmp_path.glob("run-*")
    assert [path.name for path in run.glob("jobs/*/algo-1/input/data/train/*")] == [NO_DATA_FILE]


def test_a_tuning_demo_tags_each_trials_lines_and_unpacks_its_best_trial(tmp_path, capsys):
    # Given a work dir holding KEPT_RUNS earlier runs, each with its job's outputs
    for index in range(KEPT_RUNS):
        (tmp_path / f"run-20000101-00000{index}-earlier" / "jobs" / f"earlier-job-{index}").mkdir(parents=True)
        (tmp_path / "outputs" / f"earlier-job-{index}").mkdir(parents=True)
    small_model = [argument for name, value in SMALL_MODEL.items() for argument in ("--hyperparameter",
                                                                                     f"{name}={value}")]

    # When the demo tunes the ranker's learning rate over two trials that run side by side
    exit_code = main(["--entry-point", "train_ddp.py", "--queries", "64", "--epochs", "2",
                      *small_model, "--tune", "learning-rate=continuous:0.001:0.01:log", "--strategy", "Random",
                      "--max-jobs", "2", "--max-parallel-jobs", "2", "--random-seed", "1",
                      "--work-dir", str(tmp_path)])

    # Then each trial's log lines carry its number, and no line is tagged with the host alone
    printed = capsys.readouterr().out
    assert exit_code == 0, printed[-3000:]
    for number in ("001", "002"):
        assert re.search(rf"^\[trial {number} algo-1\] epoch=1 ", printed, re.MULTILINE), printed[-3000:]
    assert not re.search(r"^\[algo-", printed, re.MULTILINE)
    # And the summary unpacks the best trial as a single job's summary does: its model and plots, under outputs/
    fields = summary_fields(printed)
    best = fields["best"].split()[0]
    outputs = tmp_path / "outputs" / best
    assert Path(fields["model"].removesuffix("/ (model.tar.gz unpacked)")).resolve() == (outputs / "model").resolve()
    assert (outputs / "model" / "model_config.json").is_file()
    plots = [Path(plot).resolve() for plot in fields["plot"].split(", ")]
    assert sorted(plot.name for plot in plots) == ["loss.png", "ndcg.png"]
    assert all(plot.parent == outputs.resolve() and plot.is_file() for plot in plots)
    # And the work dir keeps the newest KEPT_RUNS runs: the oldest earlier run and its outputs are gone
    runs = sorted(path.name for path in tmp_path.glob("run-*"))
    assert len(runs) == KEPT_RUNS and runs[0] == "run-20000101-000001-earlier"
    assert not (tmp_path / "outputs" / "earlier-job-0").exists() and (tmp_path / "outputs" / "earlier-job-1").exists()
