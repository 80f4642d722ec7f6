"""A healthy script whose quiet spells on every host but rank 0's are longer than the watchdog allows: rank 0 logs a
step every second for `--steps` seconds, the other ranks only that they started."""

import argparse
import os
import time

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=14)
args = parser.parse_args()
rank = int(os.environ["RANK"])
print(f"rank {rank} started on {os.environ['SM_CURRENT_HOST']}", flush=True)
for step in range(1, args.steps + 1):
    time.sleep(1)
    if rank == 0:
        print(f"step={step}", flush=True)
