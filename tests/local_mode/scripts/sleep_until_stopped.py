"""Fixture entry point: runs until SIGTERM, then records that it was asked to stop and exits like a trainer."""

import os
import signal
import sys
import time
from pathlib import Path


def on_sigterm(signum, frame):
    (Path(os.environ["SM_MODEL_DIR"]) / "stopped-by-sigterm.txt").write_text("checkpoint written")
    print("SIGTERM received, checkpoint written", flush=True)
    sys.exit(0)


signal.signal(signal.SIGTERM, on_sigterm)
# A metric line (MetricDefinitions pick it up) tells the test the handler is in place: a stop sent before this line
# would find Python's default SIGTERM action and nothing saved.
print("training forever: step=0", flush=True)
while True:
    time.sleep(0.1)
