"""Fixture entry point: joins a gloo process group from torchrun's or mpirun's variables and all-reduces ranks."""

import json
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "0")))
world_size = int(os.environ.get("WORLD_SIZE", os.environ.get("OMPI_COMM_WORLD_SIZE", "1")))
dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world_size)
total = torch.tensor([float(rank)])
dist.all_reduce(total)
print(f"rank {rank}/{world_size} on {os.environ['SM_CURRENT_HOST']} sum={total.item()}", flush=True)
if rank == 0:
    (Path(os.environ["SM_MODEL_DIR"]) / "allreduce.json").write_text(
        json.dumps({"world_size": world_size, "sum": total.item()}))
dist.barrier()  # no rank leaves while another is still in the all-reduce: gloo would abort it
time.sleep(0.25)  # gloo's worker frees the barrier's work with the GIL before exit (see byo/plain_scripts/train.py)
dist.destroy_process_group()
