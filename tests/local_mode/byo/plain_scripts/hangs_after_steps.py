"""A script that hangs after a few steps, as one whose data loader deadlocks does: rank 0 logs three steps (the
other ranks log only that they started, as ranks other than 0 usually do), then every rank waits forever without
another line, outside any collective."""

import os
import threading
import time

rank = int(os.environ["RANK"])
print(f"rank {rank} started on {os.environ['SM_CURRENT_HOST']}", flush=True)
if rank == 0:
    for step in range(1, 4):
        time.sleep(0.5)
        print(f"step={step} loss={1 / step:.3f}", flush=True)
threading.Event().wait()
