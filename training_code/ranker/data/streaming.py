"""Batches for training sets larger than device memory: read from memory-mapped binary shards.

Each rank reads only its own shards (`shards[rank::world_size]`). Background threads gather each batch's whole
queries into pinned host buffers (padded `[batch, max_docs, features]`): with `threads` threads, thread t fills steps
t, t + threads, ... into its own `prefetch` buffers, and the trainer takes them back in step order and copies each to
the device asynchronously. numpy's gathers release the interpreter lock, so the threads fill in parallel; how fast
they fill against how fast a GPU trains is measured in docs/benchmarks.md (CPU data path, and the optimisation log).
A buffer is refilled only after its copy has finished (a CUDA event its thread waits on), so the trainer never waits
for the disk unless the disk is slower than the model. Order is deterministic by (seed, epoch) within each rank's
shards, whatever the thread count.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch

from ranker.data import shards
from ranker.data.batches import Batch, EpochBatches, epoch_permutation, resolved_batch_size


class StreamingBatches(EpochBatches):
    def __init__(self, folder: Path, batch_size: int, rank: int, world_size: int, seed: int, device: torch.device,
                 prefetch: int = 2, log1p: bool = False, threads: int = 4):
        manifest = shards.read_manifest(folder)
        names = manifest["shards"]
        if len(names) < world_size:
            raise ValueError(f"streaming: {len(names)} shard(s) in {folder} for {world_size} processes; rewrite "
                             f"the channel with ranker.data.convert --docs-per-shard small enough for >= {world_size}")
        if threads < 1 or prefetch < 1:
            raise ValueError(f"streaming: threads={threads}, prefetch={prefetch}; use at least 1 of each")
        self.seed, self.device, self.log1p = seed, device, log1p
        self.prefetch, self.threads = prefetch, threads
        self.max_docs, self.num_features = manifest["max_docs"], manifest["num_features"]
        self.shards = [shards.open_shard(folder, name) for name in names[rank::world_size]]
        # (shard, query) of every local query, so one permutation spans all of this rank's shards.
        self.local_queries = np.array([(s, q) for s, shard in enumerate(self.shards) for q in range(shard.num_queries)])
        # Every rank must take the same number of steps (DDP); the offsets files alone tell each rank's count.
        per_rank = [sum(len(np.load(Path(folder) / f"{name}.offsets.npy")) - 1 for name in names[r::world_size])
                    for r in range(world_size)]
        self.batch_size = batch_size = resolved_batch_size(batch_size, min(per_rank), rank)
        self.steps_per_epoch = min(per_rank) // batch_size
        if self.steps_per_epoch == 0:
            raise ValueError(f"batch_size: {batch_size} queries exceeds the {min(per_rank)} queries of the smallest "
                             "rank's shards; lower --batch-size")

    def _fill(self, buffer: Batch, batch_queries: np.ndarray) -> None:
        """Copies the batch's queries into the (pinned) host buffer: one gather per shard over every document row of
        the batch, instead of a Python step per query (which held the loader to a third of a GPU's appetite)."""
        features, labels, mask = (tensor.numpy().reshape(-1, *tensor.shape[2:]) for tensor in buffer)
        features.fill(0)
        labels.fill(0)
        mask.fill(False)
        for shard_index in np.unique(batch_queries[:, 0]):
            slots = np.flatnonzero(batch_queries[:, 0] == shard_index)
            shard = self.shards[shard_index]
            queries = batch_queries[slots, 1]
            starts, stops = shard.query_offsets[queries], shard.query_offsets[queries + 1]
            lengths = stops - starts
            # Row k of query i: source row starts[i] + k, destination row slot_i * max_docs + k.
            within = np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths)
            source = np.repeat(starts, lengths) + within
            destination = np.repeat(slots * self.max_docs, lengths) + within
            rows = shard.features[source]
            features[destination, : rows.shape[1]] = np.log1p(np.maximum(rows, 0)) if self.log1p else rows
            labels[destination] = shard.labels[source]
            mask[destination] = True

    def _new_buffer(self) -> Batch:
        pin = self.device.type == "cuda"
        shape = (self.batch_size, self.max_docs)
        return (torch.empty(*shape, self.num_features, pin_memory=pin), torch.empty(*shape, pin_memory=pin),
                torch.empty(*shape, dtype=torch.bool, pin_memory=pin))

    def epoch_batches(self, epoch: int, start_step: int = 0) -> Iterator[Batch]:
        order = epoch_permutation(len(self.local_queries), self.seed, epoch).numpy()
        steps = range(start_step, self.steps_per_epoch)
        lanes = [_Lane(self, order, steps[first::self.threads]) for first in range(min(self.threads, len(steps)))]
        try:
            for position in range(len(steps)):
                lane = lanes[position % len(lanes)]  # lane t holds steps t, t + len(lanes), ...: step order
                index = lane.ready.get()
                if self.device.type == "cuda":
                    batch = tuple(t.to(self.device, non_blocking=True) for t in lane.buffers[index])
                    copied = torch.cuda.Event()
                    copied.record()
                else:
                    batch, copied = tuple(t.clone() for t in lane.buffers[index]), None
                lane.free.put((index, copied))
                yield batch
        finally:
            for lane in lanes:
                lane.close()


class _Lane:
    """One filling thread with its own buffers: `free` hands it a buffer index (and the CUDA event of that buffer's
    last copy), `ready` hands the filled index back."""

    def __init__(self, batches: StreamingBatches, order: np.ndarray, steps: range):
        self.buffers = [batches._new_buffer() for _ in range(batches.prefetch)]
        self.free: queue.Queue = queue.Queue()
        self.ready: queue.Queue = queue.Queue()
        for index in range(len(self.buffers)):
            self.free.put((index, None))
        self.stop = threading.Event()

        size = batches.batch_size

        def produce() -> None:
            for step in steps:
                index, copied = self.free.get()
                if self.stop.is_set():
                    return
                if copied is not None:
                    copied.synchronize()  # waits in this thread, not the trainer's
                batches._fill(self.buffers[index], batches.local_queries[order[step * size:(step + 1) * size]])
                self.ready.put(index)

        self.thread = threading.Thread(target=produce, daemon=True, name="streaming-batches")
        self.thread.start()

    def close(self) -> None:
        self.stop.set()
        self.free.put((0, None))  # wakes the thread if it is waiting for a buffer
        self.thread.join()
