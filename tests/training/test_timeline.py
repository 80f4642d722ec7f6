"""The phase timeline a job logs (ranker.training.timeline), which benchmarks.cpu.data_pipeline reads back."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from ranker.training import timeline
from training_launch import TRAINING_CODE, script_env


def test_a_fresh_interpreter_counts_from_its_own_start_not_from_the_import():
    # Given an interpreter that sleeps before it imports the timeline
    probe = ("import time; time.sleep(0.5); from ranker.training import timeline; timeline.mark('imported'); "
             "timeline.mark('parsed', enabled=False)")
    started = time.monotonic()
    finished = subprocess.run([sys.executable, "-c", probe], cwd=TRAINING_CODE, env=script_env(), capture_output=True,
                              text=True, timeout=60, check=True)
    lasted = time.monotonic() - started
    # Then its one logged mark counts the sleep, and no more than the process lived
    marks = timeline.read(finished.stdout)
    assert list(marks) == ["imported"]
    assert 0.5 <= marks["imported"] <= lasted + 0.02  # /proc counts in clock ticks of 10 ms


def test_an_unknown_phase_names_the_known_ones():
    with pytest.raises(ValueError, match="not one of"):
        timeline.mark("warmed up")
