"""Fixture script: a native DDP script written from docs/bring-your-own.md's recipe (the one call, then
`DDP(model.to(process.device), device_ids=process.device_ids)`), with the DistributedSampler a DDP script splits its
data with, a few steps and `shutdown()`."""

import sagemaker_distributed
import torch
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

process = sagemaker_distributed.init_process_group()
try:
    model = DDP(torch.nn.Linear(4, 1).to(process.device), device_ids=process.device_ids)
    dataset = TensorDataset(torch.rand(32, 4), torch.rand(32, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    steps = 0
    for features, targets in DataLoader(dataset, batch_size=8, sampler=DistributedSampler(dataset)):
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(features.to(process.device)), targets.to(process.device)).backward()
        optimizer.step()
        steps += 1
    print(f"rank {process.rank} of {process.world_size} on {process.backend}: {steps} steps", flush=True)
finally:
    sagemaker_distributed.shutdown()
