"""A script written for SDK v3's ModelTrainer, knowing nothing of this pipeline: it reads the variables ModelTrainer's
drivers set (SM_HOST_COUNT, SM_CURRENT_HOST_RANK, SM_MASTER_ADDR, SM_MASTER_PORT, SM_MODEL_DIR) and forms one gloo
group across the hosts: under `Torchrun()` from torchrun's own variables, without a distribution (the basic driver,
one `python` per host) by meeting at SM_MASTER_ADDR:SM_MASTER_PORT as host SM_CURRENT_HOST_RANK of SM_HOST_COUNT.

It checks that the group has one rank per host, and all-reduces each rank's host rank into its own slot, so that rank
0 sees which host each rank ran on; rank 0 writes what it saw to SM_MODEL_DIR/group.json. It ends as
plain_scripts/train.py does (a barrier, a moment's sleep, then leaving the group) to end cleanly every time.
"""

import json
import os
import time

import torch
import torch.distributed as dist

host_count = int(os.environ["SM_HOST_COUNT"])
host_rank = int(os.environ["SM_CURRENT_HOST_RANK"])
under_torchrun = "TORCHELASTIC_RUN_ID" in os.environ
if under_torchrun:
    dist.init_process_group("gloo")
else:
    dist.init_process_group("gloo", init_method=f"tcp://{os.environ['SM_MASTER_ADDR']}:{os.environ['SM_MASTER_PORT']}",
                            rank=host_rank, world_size=host_count)
if dist.get_world_size() != host_count:
    raise SystemExit(f"world size {dist.get_world_size()} for SM_HOST_COUNT={host_count}")
hosts_of_ranks = torch.zeros(dist.get_world_size())
hosts_of_ranks[dist.get_rank()] = host_rank
dist.all_reduce(hosts_of_ranks)
if dist.get_rank() == 0:
    seen = {"launcher": "torchrun" if under_torchrun else "python", "world_size": dist.get_world_size(),
            "host_of_each_rank": hosts_of_ranks.int().tolist(), "master": os.environ["SM_MASTER_ADDR"]}
    print(f"group: {json.dumps(seen)}", flush=True)
    with open(os.path.join(os.environ["SM_MODEL_DIR"], "group.json"), "w") as file:
        json.dump(seen, file)
dist.barrier()
time.sleep(0.25)
dist.destroy_process_group()
