"""The hot path both loops share: model, optimizer and schedule set-up, one training step, evaluation.

Nothing here reads a value back to the host: losses stay device tensors until the loop decides to log, so the GPU
never waits on Python between steps.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import sagemaker_distributed as distributed
import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import bf16_compress_hook
from torch.nn.parallel import DistributedDataParallel

from ranker.config import ModelConfig, TrainConfig
from ranker.data.batches import Batch, DeviceQueries
from ranker.gpu import fast_paths
from ranker.gpu.captured_step import CapturedLoss, CapturedStep, use_capture_stream
from ranker.gpu.fast_paths import TrainingPath
from ranker.gpu.fused_data_parallel import FusedDataParallel
from ranker.gpu.fused_embedding import FusedEmbedding, fusable
from ranker.gpu.fused_linear import FusedLayers
from ranker.gpu.sharded_optimizer import ShardedAdamW
from ranker.model.encoding import PiecewiseLinearEncoding
from ranker.model.metrics import ndcg_sums
from ranker.model.mlp import RankingMLP
from ranker.training.meter import TrainingMeter
from ranker.training.schedule import PlateauDecay

LossFunction = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def build_model(config: ModelConfig, device: torch.device) -> RankingMLP:
    """The model on `device`, its input encoding not fitted yet: `fit_encoding` for a fresh run, or load a state
    dict (a checkpoint, an artifact) that holds the fitted one."""
    return RankingMLP(config).to(device)


def fit_encoding(model: RankingMLP, training_rows: np.ndarray, seed: int) -> None:
    """Fits the model's input encoding on `training_rows`: the training channel's features as the model sees them
    (ranker.training.session.encoding_rows), the same on every rank."""
    if isinstance(model.encoding, PiecewiseLinearEncoding):
        model.encoding.fit(training_rows, seed)


def training_path(config: TrainConfig, device: torch.device, world_size: int) -> TrainingPath:
    """ranker.gpu.fast_paths' choice for this process, once its process group is up."""
    return fast_paths.choose(config, device.type, world_size, dist.get_backend() if world_size > 1 else "")


def wrap_for_training(model: nn.Module, device: torch.device, world_size: int, config: TrainConfig) -> nn.Module:
    """The model as every loop's step runs it (train_ddp.py, the Lightning module, the benchmark harness), on the
    path ranker.gpu.fast_paths chose: its per-feature embeddings through the fused kernels, then FusedDataParallel
    around it, or run through `torch.compile` (`--compile true`) or the fused bf16 layers, then wrapped in DDP across
    ranks. DDP writes gradients straight into its all-reduce
    buckets and is told the graph is static (the MLP uses every parameter every step), so it overlaps communication
    with the backward pass."""
    path = training_path(config, device, world_size)
    if path.fused_data_parallel:  # it runs the dense layers itself
        return FusedDataParallel(with_fused_embedding(model, path, config), shard_optimizer=path.sharded_update)
    if config.compile:
        model = torch.compile(model)
    else:
        model = with_fused_kernels(model, path, config)
    if world_size == 1:
        return model
    wrapped = DistributedDataParallel(model, device_ids=[device] if device.type == "cuda" else None,
                                      gradient_as_bucket_view=True, static_graph=True)
    comm_hook = ddp_comm_hook(device, config.switches.allreduce_dtype)
    if comm_hook is not None:
        wrapped.register_comm_hook(None, comm_hook)
    return wrapped


def with_fused_embedding(model: nn.Module, path: TrainingPath, config: TrainConfig) -> nn.Module:
    """`model` with its per-feature embeddings run by the fused kernels where `path` allows and it has them."""
    return FusedEmbedding(model, config.precision) if path.fused_embedding and fusable(model) else model


def with_fused_kernels(model: nn.Module, path: TrainingPath, config: TrainConfig) -> nn.Module:
    """`model` run through the fused kernels `path` takes (the per-feature embedding's, the dense layers'), and no
    data parallelism: what one process's step runs, and what DDP (the native loop's or Lightning's) wraps."""
    model = with_fused_embedding(model, path, config)
    return FusedLayers(model) if path.fused_layers else model


def ddp_comm_hook(device: torch.device, allreduce_dtype: str) -> Callable | None:
    """bf16 gradient compression (sum then divide, which smddp supports too) on GPU; None keeps DDP's fp32 path."""
    return bf16_compress_hook if device.type == "cuda" and allreduce_dtype == "bf16" else None


@dataclass
class TrainingParts:
    """What a loop trains with, built in one place (`build_training`) for every loop and the benchmark harness."""

    model: nn.Module
    """The plain model: what checkpoints and exports hold."""
    trained: nn.Module
    """The model as the step runs it (wrap_for_training)."""
    optimizer: torch.optim.Optimizer
    scheduler: PlateauDecay
    path: TrainingPath


def build_training(model: nn.Module, device: torch.device, world_size: int, config: TrainConfig,
                   total_steps: int) -> TrainingParts:
    """Wraps `model` (already on `device`, with any resumed weights loaded) for training and builds its optimizer and
    learning-rate schedule over `total_steps`."""
    trained = wrap_for_training(model, device, world_size, config)
    optimizer = build_optimizer(trained, config, device)
    return TrainingParts(model, trained, optimizer, build_scheduler(optimizer, total_steps, config),
                         training_path(config, device, world_size))


def build_optimizer(trained: nn.Module, config: TrainConfig, device: torch.device) -> torch.optim.Optimizer:
    """AdamW over the model's parameters, for the model as `wrap_for_training` returned it: split across the ranks
    (ShardedAdamW) where FusedDataParallel shards the update. Build the scheduler on what this returns."""
    # The fused kernel updates all parameters in one launch on GPU; the CPU build uses the default path.
    optimizer = torch.optim.AdamW(unwrap(trained).parameters(), lr=config.learning_rate,
                                  weight_decay=config.weight_decay, fused=device.type == "cuda")
    if isinstance(trained, FusedDataParallel) and trained.shard_optimizer:
        return ShardedAdamW(trained, optimizer)
    return optimizer


def import_optimizer_machinery() -> None:
    """What torch's optimizers import at their first use (torch._dynamo, from torch 2.1 on: a second or more of a CPU
    host's time), imported now: called while other work runs (the text parse a job started ahead of its imports),
    it no longer delays the first step."""
    import torch._dynamo  # noqa: F401


def build_scheduler(optimizer: torch.optim.Optimizer, total_steps: int, config: TrainConfig) -> PlateauDecay:
    """The learning-rate schedule of `config` over a run of at most `total_steps` steps (ranker.training.schedule)."""
    return PlateauDecay(optimizer, warmup_steps=round(total_steps * config.warmup_fraction), total_steps=total_steps,
                        decay_patience=config.lr_decay_patience, decay_factor=config.lr_decay_factor)


def autocast(device: torch.device, precision: str = "bf16",
             cache_enabled: bool = True) -> contextlib.AbstractContextManager:
    """bf16 on GPU (tensor cores, no loss scaling needed); full float32 on CPU, where bf16 buys nothing."""
    if device.type == "cuda" and precision == "bf16":
        return torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=cache_enabled)
    return contextlib.nullcontext()


def forward_backward_update(model: nn.Module, optimizer: torch.optim.Optimizer, batch: Batch,
                            loss_function: LossFunction, device: torch.device, precision: str = "bf16",
                            autocast_cache: bool = True) -> torch.Tensor:
    """Forward, loss, backward and the optimizer update on one batch whose gradients start cleared; returns the
    loss as a detached device tensor (no host sync). The eager step and the captured one (which records this with
    the autocast cache off: it would keep stale bf16 weight copies alive) both run it."""
    features, labels, mask = batch
    with autocast(device, precision, autocast_cache):
        scores = model(features)
    loss = loss_function(scores, labels, mask)
    loss.backward()
    optimizer.step()
    return loss.detach()


def uses_cuda_graph(config: TrainConfig, device: torch.device) -> bool:
    return fast_paths.choose(config, device.type).cuda_graph


def prepare_device(config: TrainConfig, device: torch.device) -> None:
    """Per-process device set-up before any model exists: the stream a captured step needs."""
    if uses_cuda_graph(config, device):
        use_capture_stream(device)


def step_function(model: nn.Module, optimizer: torch.optim.Optimizer,
                  scheduler: torch.optim.lr_scheduler.LRScheduler, loss_function: LossFunction, device: torch.device,
                  config: TrainConfig, meter: TrainingMeter) -> Callable[[Batch], None]:
    """The step a loop calls once per batch: replayed from a CUDA graph where `uses_cuda_graph`, else eager. It adds
    the batch's loss and documents to `meter` on the device (inside the graph) and counts the step."""

    def update(batch: Batch, autocast_cache: bool = True) -> None:
        meter.add(forward_backward_update(model, optimizer, batch, loss_function, device, config.precision,
                                          autocast_cache), batch[2])

    if uses_cuda_graph(config, device):
        run: Callable[[Batch], None] = CapturedStep(model, optimizer, device,
                                                    lambda batch: update(batch, autocast_cache=False))
    else:
        def run(batch: Batch) -> None:
            optimizer.zero_grad(set_to_none=True)
            update(batch)

    def step(batch: Batch) -> None:
        run(batch)
        scheduler.step()  # under a graph: writes the learning rate tensor the next replay reads
        meter.steps += 1

    return step


def captured_loss(model: nn.Module, loss_function: LossFunction, device: torch.device,
                  config: TrainConfig) -> CapturedLoss:
    """The loss of `model` on a batch, forward and backward replayed from CUDA graphs: for a loop that runs its own
    backward pass and optimizer (Lightning's), where `uses_cuda_graph` and the loop runs one process."""
    return CapturedLoss(model, loss_function, device, lambda: autocast(device, config.precision, cache_enabled=False))


def learning_rate(scheduler: torch.optim.lr_scheduler.LRScheduler) -> float:
    """The current learning rate as a number (a device tensor under CUDA graphs: reading it syncs, so log only)."""
    return float(scheduler.get_last_lr()[0])


# On a CPU, each evaluation batch holds about this many documents: the per-feature embedding's activations (136
# features x 16 units x 4 bytes a document per layer) then stay in the core's cache instead of streaming through memory.
CPU_EVALUATION_DOCUMENTS = 400
GPU_EVALUATION_QUERIES = 256


def evaluation_batch_queries(queries: DeviceQueries) -> int:
    """Queries per evaluation batch of `queries` on their device: `GPU_EVALUATION_QUERIES` on a GPU; on a CPU about
    CPU_EVALUATION_DOCUMENTS documents, scored with torch on one thread (`one_torch_thread`)."""
    if queries.features.device.type != "cpu":
        return GPU_EVALUATION_QUERIES
    return max(1, CPU_EVALUATION_DOCUMENTS // max(queries.features.shape[1], 1))


@contextlib.contextmanager
def one_torch_thread() -> Iterator[None]:
    """torch on one thread inside, its thread count restored after: how a CPU scores small evaluation batches, whose
    operators, split across cores, spend more time waiting for one another than computing."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@torch.no_grad()
def evaluate(model: nn.Module, queries: DeviceQueries, rank: int, world_size: int,
             loss_function: LossFunction) -> torch.Tensor:
    """`[NDCG@k sums..., query count, loss sum]` over all ranks: each rank scores its contiguous slice of the
    queries, then one all-reduce SUM adds the totals up. On a GPU `GPU_EVALUATION_QUERIES` queries at a time; on a
    CPU see `_cpu_totals`."""
    was_training = model.training
    model.eval()
    start, stop = (queries.num_queries * rank) // world_size, (queries.num_queries * (rank + 1)) // world_size
    if queries.features.device.type == "cpu":
        totals = _cpu_totals(model, queries, start, stop, loss_function)
    else:
        totals = _totals(model, queries, start, stop, GPU_EVALUATION_QUERIES, loss_function)
    model.train(was_training)
    return distributed.all_reduce_sum(totals)


def _totals(model: nn.Module, queries: DeviceQueries, start: int, stop: int, batch_size: int,
            loss_function: LossFunction) -> torch.Tensor:
    """`evaluate`'s totals over queries `start` to `stop`, `batch_size` queries at a time."""
    device = queries.features.device
    totals = torch.zeros(6, device=device)
    for first in range(start, stop, batch_size):
        indices = torch.arange(first, min(first + batch_size, stop), device=device)
        features, labels, mask = queries.gather(indices)
        with autocast(device):
            scores = model(features)
        totals[:5] += ndcg_sums(scores, labels, mask)
        totals[5] += loss_function(scores, labels, mask) * len(indices)
    return totals


def _cpu_totals(model: nn.Module, queries: DeviceQueries, start: int, stop: int,
                loss_function: LossFunction) -> torch.Tensor:
    """`_totals` on a CPU: batches of about CPU_EVALUATION_DOCUMENTS documents, and one thread per core of torch's,
    each scoring its share of the queries with torch single-threaded. Small operators split across cores spend
    more time waiting for one another than computing (most of all on a shared machine), and batches that fit the
    cache keep the activations out of memory: together several times less CPU time than large batches on every
    core, for the same scores."""
    threads = torch.get_num_threads()
    batch_size = evaluation_batch_queries(queries)
    cuts = [start + (stop - start) * part // threads for part in range(threads + 1)]

    def share(part: int) -> torch.Tensor:
        with torch.no_grad():  # grad mode is per thread
            return _totals(model, queries, cuts[part], cuts[part + 1], batch_size, loss_function)

    with one_torch_thread(), ThreadPoolExecutor(threads) as pool:
        return torch.stack(list(pool.map(share, range(threads)))).sum(0)


def unwrap(model: nn.Module) -> nn.Module:
    """The plain module inside the data-parallel, fused-layer and torch.compile wrappers: what checkpoints and
    exports hold."""
    while True:
        inner = model.module if hasattr(model, "module") else getattr(model, "_orig_mod", None)
        if inner is None:
            return model
        model = inner
