"""A pytorch/examples-style DDP script: TensorDataset + DataLoader + DistributedSampler, fp32, plain DDP.

Launch: torchrun --nproc_per_node N -m benchmarks.baselines.naive_ddp --results results.jsonl
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

from benchmarks.baselines.common import dense_mlp, parse_args, synthetic_dataset
from benchmarks.harness.models import PLAIN_MLP
from benchmarks.harness.timing import StepWindows, append_result, summarise


def main() -> None:
    args = parse_args(__doc__)
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if cuda else "gloo")
    dataset = synthetic_dataset(args.features, samples=args.batch_size * 16, seed=dist.get_rank())
    for width in args.widths:
        model = DDP(dense_mlp(args.features, width).to(device), device_ids=[local_rank] if cuda else None)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        loader = DataLoader(dataset, batch_size=args.batch_size, sampler=DistributedSampler(dataset), pin_memory=cuda)
        windows = StepWindows(args.warmup_steps, args.steps_per_window, args.windows, device)
        epoch = 0
        while not windows.finished:
            loader.sampler.set_epoch(epoch)
            for inputs, labels in loader:
                inputs, labels = inputs.to(device), labels.to(device)
                optimizer.zero_grad()
                loss = F.mse_loss(model(inputs).squeeze(-1), labels)
                loss.backward()
                optimizer.step()
                windows.step_done()
                if windows.finished:
                    break
            epoch += 1
        result = summarise("naive-ddp", PLAIN_MLP, width, args.features, args.batch_size, windows)
        if dist.get_rank() == 0:
            append_result(args.results, result)
            print(f"naive-ddp width={width} world={result.world_size} samples/s={result.samples_per_second:,.0f}")
        del model, optimizer
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
