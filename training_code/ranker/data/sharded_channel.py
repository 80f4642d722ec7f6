"""A training channel SageMaker sharded across the job's hosts (`ShardedByS3Key`): each host holds its own share of
the channel's files, and no other host holds those.

The host's ranks split its share (each takes a contiguous run of its queries), so every training query belongs to
exactly one rank. What the model and the loop need from the channel as a whole, the ranks agree on with two gathers
(`agree`): the feature count (the widest file of any host), the batch size `--batch-size 0` chooses (from every
rank's query count), the steps per epoch (enough for the largest part: ranker.data.batches.OwnQueryBatches gives
smaller parts smaller batches) and the rows the input encoding is fitted on (a sample of every rank's rows, in
proportion to its documents; below FIT_ROWS documents all of them, so the encoding is exactly the one the whole
channel gives). Every rank ends up with the same numbers, so the model scores alike whichever rank writes it.

SageMaker places each object on a host on its own, so only files that stand alone can be sharded: LETOR text whose
rows carry `qid:`, not a `.query` group file (it may land on another host than its data file) and not binary shards
(a shard's arrays and its folder's manifest are separate objects).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import sagemaker_distributed as distributed

from ranker.data import channels, shards
from ranker.data.batches import resolved_batch_size
from ranker.data.ranking_data import RankingData

SHARDED = "ShardedByS3Key"


def host_share(path: Path, num_features: int | None, local_ranks: int) -> RankingData:
    """The files of the training channel this host holds, parsed once for its `local_ranks` ranks."""
    path = Path(path)
    if shards.is_shard_dir(path) or any(path.glob("*.npy")):
        raise ValueError(f"train: {path} holds binary shards, whose arrays and manifest {SHARDED} would spread over "
                         "different hosts: keep a binary channel FullyReplicated (with input_mode FastFile a host "
                         "reads only what its ranks use), or shard LETOR text with qid: columns")
    group_files = sorted(file.name for file in path.glob("*.query"))
    if group_files:
        raise ValueError(f"train: {path} holds group files {group_files}, which {SHARDED} may place on another host "
                         "than their data files: write a qid: column into every row instead (python -m "
                         "ranker.data.synthetic --qid writes them), or keep the channel FullyReplicated")
    if not channels.letor_files(path):
        raise ValueError(f"train: {SHARDED} gave this host none of the channel's LETOR files ({path} is empty of "
                         "them): give the channel at least as many files as the job has instances, or fewer "
                         "instances")
    return channels.load_channel(path, num_features, local_ranks)


def rank_part(data: RankingData, local_rank: int, local_ranks: int) -> RankingData:
    """This rank's contiguous part of its host's queries."""
    if local_ranks == 1:
        return data
    count = data.num_queries
    return data.select_queries(np.arange(count * local_rank // local_ranks, count * (local_rank + 1) // local_ranks))


@dataclass(frozen=True)
class Agreement:
    """What every rank of the job uses alike, from every rank's part of the channel."""

    num_features: int
    batch_size: int
    steps_per_epoch: int
    queries_per_rank: tuple[int, ...]
    encoding_rows: np.ndarray
    """Training rows of every rank, as the model sees them, to fit the input encoding on."""

    def describe(self) -> str:
        return (f"train channel {SHARDED}: {sum(self.queries_per_rank):,} training queries held by "
                f"{len(self.queries_per_rank)} ranks ({', '.join(f'{count:,}' for count in self.queries_per_rank)}"
                f" by rank), {self.steps_per_epoch} steps per epoch of at most {self.batch_size} queries per rank, "
                f"{self.num_features} features")


def agree(train: RankingData, *, num_features: int | None, requested_batch_size: int, sample_rows: int, rank: int,
          world_size: int, seed: int) -> Agreement:
    """Gathers every rank's counts and its share of `sample_rows` rows (collective: every rank calls it). `train` is
    this rank's part, as the model will see it; `num_features` the configured width (None: the widest part's)."""
    facts = distributed.all_gather_objects((train.num_queries, len(train.labels), train.num_features))
    queries = tuple(int(count) for count, _, _ in facts)
    empty = [index for index, count in enumerate(queries) if count == 0]
    if empty:
        raise ValueError(f"train: ranks {empty} hold no training query of the {SHARDED} channel ({sum(queries)} "
                         "queries in all): give the channel more files than the job has ranks, or fewer instances")
    width = num_features or max(int(columns) for _, _, columns in facts)
    batch_size = resolved_batch_size(requested_batch_size, sum(queries) // world_size, rank)
    documents = [int(count) for _, count, _ in facts]
    # In proportion to each rank's documents: the union is a sample of the whole channel.
    take = documents[rank] if sum(documents) <= sample_rows else round(sample_rows * documents[rank] / sum(documents))
    chosen = np.sort(np.random.default_rng([seed, rank]).choice(documents[rank], size=take, replace=False))
    rows = np.zeros((take, width), dtype=np.float32)
    rows[:, :train.num_features] = train.features[chosen]
    gathered = distributed.all_gather_objects(rows)
    return Agreement(num_features=width, batch_size=batch_size,
                     steps_per_epoch=math.ceil(max(queries) / batch_size), queries_per_rank=queries,
                     encoding_rows=np.concatenate(gathered))
