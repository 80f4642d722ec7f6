"""An entry point imports what every run needs and nothing more: the plots' matplotlib, the streaming loader,
Lightning and the libraries it brings (torchmetrics, scipy, torch.compile's machinery) only where a run uses them.
Each entry point is checked in a fresh interpreter, as a job starts: imported, then run."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path

import pytest
from training_launch import TRAINING_CODE, script_env

# Modules some runs need and others not; the native entry point loads none of them at import.
SOMETIMES_NEEDED = ("lightning", "torchmetrics", "scipy", "sklearn", "matplotlib", "torch._dynamo",
                    "ranker.data.streaming")


@cache  # one fresh interpreter per entry point answers every test that asks about it
def imported_then_run(entry_point: str) -> tuple[frozenset[str], subprocess.CompletedProcess]:
    """What importing `entry_point` (a module of the training code) loads of SOMETIMES_NEEDED, and then the same
    interpreter running it as a job runs it (`__main__`: the collector paused for its imports) on a training folder
    found empty once they are done. The run repeats no import, and nothing it loads counts as loaded at import."""
    with tempfile.TemporaryDirectory() as folder:
        empty_channel = Path(folder) / "train"
        empty_channel.mkdir()
        flags = ["--train", str(empty_channel), "--model-dir", f"{folder}/model", "--output-data-dir",
                 f"{folder}/output", "--checkpoint-dir", f"{folder}/checkpoints"]
        script = f"{entry_point}.py"
        probe = (f"import atexit, gc, runpy, sys, {entry_point}; "
                 f"print('loaded:', *(name for name in {SOMETIMES_NEEDED!r} if name in sys.modules)); "
                 "atexit.register(lambda: print('collecting', gc.isenabled())); "
                 f"sys.argv = [{script!r}, *{flags!r}]; runpy.run_path({script!r}, run_name='__main__')")
        finished = subprocess.run([sys.executable, "-c", probe], cwd=TRAINING_CODE, env=script_env(),
                                  capture_output=True, text=True, timeout=120)
    loaded = finished.stdout.split("loaded:", 1)[1].splitlines()[0].split()
    return frozenset(loaded), finished


def modules_loaded_by(module: str) -> frozenset[str]:
    return imported_then_run(module)[0]


def test_importing_train_ddp_loads_none_of_the_sometimes_needed_modules():
    assert modules_loaded_by("train_ddp") == set()


@pytest.mark.parametrize("module", ["train_ddp", "train_lightning"])
def test_neither_entry_point_loads_the_streaming_loader_or_scikit_learn_at_import(module):
    # Lightning itself imports torchmetrics (and through it scipy and matplotlib) and torch._dynamo
    assert not modules_loaded_by(module) & {"ranker.data.streaming", "sklearn"}


@pytest.mark.parametrize("entry_point", ["train_ddp", "train_lightning"])
def test_an_entry_point_collects_garbage_again_once_its_imports_are_done(entry_point):
    # Run as a job runs it (the collector paused for the imports), on a training folder found empty once they are done
    _, finished = imported_then_run(entry_point)
    # Then the run failed after its imports, on the folder (a data error: exit status 2), with the collector on again
    # at exit
    assert "timeline: imported" in finished.stdout
    assert finished.returncode == 2 and "no LETOR text files" in finished.stderr.strip().splitlines()[-1]
    assert finished.stdout.split("collecting ")[-1].strip() == "True"
