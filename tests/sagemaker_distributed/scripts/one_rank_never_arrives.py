"""Fixture script: a DDP script with the package's one-line change whose last rank never reaches the first
collective (as a rank deadlocked in its data loader would), while the others wait in an all-reduce."""

import sys
import time

import sagemaker_distributed
import torch

with sagemaker_distributed.failure_reported():
    process = sagemaker_distributed.init_process_group()
    if process.rank == process.world_size - 1:
        print(f"rank {process.rank}: stuck before the all-reduce", flush=True)
        time.sleep(600)
    print(f"rank {process.rank}: entering the all-reduce at {time.time():.3f}", flush=True)
    sagemaker_distributed.all_reduce_sum(torch.ones(1))
    sys.exit("the all-reduce returned although a rank never entered it")
