"""A DDP script that knows nothing of this pipeline: torchrun's variables, env:// rendezvous, gloo, a model saved
where SageMaker packs model.tar.gz. Under `torch_distributed` it needs no change at all.

It ends as any gloo script must to end cleanly every time, each rank:
- meets the others in a barrier before leaving the group: a rank that closes its connections while a peer is still in a
  collective with it (the last gradient all-reduce) makes gloo abort that peer ("Connection closed by peer");
- then sleeps a moment, releasing the GIL, before it exits: gloo's worker thread frees the barrier's work just after
  reporting it done, which takes the GIL, and a worker that gets the GIL only once the interpreter is finalizing
  aborts the rank ("terminate called without an active exception", SIGABRT; pytorch/pytorch#190489), 6 runs in 75 of
  this job on 2 cores without the sleep (`sagemaker_distributed.shutdown()` sleeps so for scripts that import it).
Either failure kills a rank with no Python traceback, after the model is saved."""

import argparse
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=5)
args = parser.parse_args()

dist.init_process_group("gloo")
torch.manual_seed(dist.get_rank())
model = DistributedDataParallel(torch.nn.Linear(4, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(args.steps):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if dist.get_rank() == 0:
    print(f"world_size={dist.get_world_size()} steps={args.steps}", flush=True)
    torch.save(model.module.state_dict(), os.path.join(os.environ["SM_MODEL_DIR"], "model.pt"))
dist.barrier()
time.sleep(0.25)
dist.destroy_process_group()
