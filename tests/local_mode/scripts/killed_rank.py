"""Fixture entry point: under torchrun, the last rank dies of SIGKILL (as the kernel's OOM killer ends a process),
leaving no traceback; the others wait to be stopped, outside any collective, so that only it fails."""

import os
import signal
import time

if int(os.environ["RANK"]) == int(os.environ["WORLD_SIZE"]) - 1:
    print("loading a shard too large for this host", flush=True)
    time.sleep(1)  # the other ranks are up and waiting
    os.kill(os.getpid(), signal.SIGKILL)
while True:
    time.sleep(0.1)
