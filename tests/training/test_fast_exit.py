"""A run that succeeded ends without Python's teardown, and loses nothing the teardown would have done for others:
threads waited for, atexit handlers run, open files flushed."""

from __future__ import annotations

import subprocess
import sys

import pytest
from training_launch import TRAINING_CODE, script_env

# A process that leaves through fast_exit with work pending that Python's exit would finish: an unflushed file, a
# thread still writing, an atexit handler, output without a newline; and an object whose finalizer only the teardown
# runs.
SCRIPT = """
import atexit, sys, threading, time, types
from ranker.training import fast_exit

class TornDown:
    def __del__(self):
        print("torn down", flush=True)

keep = TornDown()
if sys.argv[3] == "mpi":
    sys.modules["mpi4py"] = types.ModuleType("mpi4py")
atexit.register(lambda: print("atexit handler ran"))
unclosed = open(sys.argv[1], "w")
unclosed.write("buffered, never closed")

def write_late():
    time.sleep(0.5)
    with open(sys.argv[2], "w") as done:
        done.write("thread finished")

threading.Thread(target=write_late).start()
sys.stdout.write("last words without a newline ")
fast_exit.leave()
"""


@pytest.mark.parametrize("library, torn_down", [("none", False), ("mpi", True)], ids=["plain", "mpi-loaded"])
def test_leaving_finishes_what_python_would_and_skips_the_teardown_unless_mpi_is_loaded(tmp_path, library, torn_down):
    unclosed, late = tmp_path / "unclosed.txt", tmp_path / "late.txt"
    finished = subprocess.run([sys.executable, "-c", SCRIPT, str(unclosed), str(late), library], cwd=TRAINING_CODE,
                              env=script_env(), capture_output=True, text=True, timeout=60)
    assert finished.returncode == 0, finished.stderr[-2000:]
    assert finished.stdout.startswith("last words without a newline atexit handler ran")
    assert unclosed.read_text() == "buffered, never closed"
    assert late.read_text() == "thread finished"
    # The teardown (the finalizer of an object still referenced at exit) runs only where MPI must be finalized
    assert ("torn down" in finished.stdout) is torn_down
