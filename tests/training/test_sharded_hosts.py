"""Both entry points on a training channel sharded across two hosts (SageMaker's ShardedByS3Key), each host a
torchrun of its own holding half of the channel's files, as the toolkit starts them: every training query is
trained by exactly one rank, and what is fitted on the training data comes from both hosts."""

from __future__ import annotations

import json
import re

import pytest
import torch
from ranker.data.synthetic import generate, write_letor
from ranker.log_format import parse_metrics
from safetensors.torch import load_file
from training_launch import TINY_MODEL_FLAGS, run_dirs, run_hosts, run_script

pytestmark = pytest.mark.slow

FILES = 4
QUERIES_PER_FILE = 24
SHARDED = json.dumps({"train": {"TrainingInputMode": "File", "S3DistributionType": "ShardedByS3Key"}})
FLAGS = ["--epochs", "2", "--batch-size", "8", *TINY_MODEL_FLAGS]
AGREEMENT = re.compile(r"train channel ShardedByS3Key: ([0-9,]+) training queries held by (\d+) ranks \(([0-9, ,]+) by "
                       r"rank\), (\d+) steps per epoch of at most (\d+) queries per rank, (\d+) features")


@pytest.fixture(scope="module")
def channels(tmp_path_factory):
    """A training channel of four files with qid columns (files of different widths: the widest sets the model's),
    dealt to two hosts as ShardedByS3Key would, and a validation channel both hosts hold."""
    root = tmp_path_factory.mktemp("sharded")
    whole, hosts = root / "whole", [root / "algo-1", root / "algo-2"]
    for index in range(FILES):
        data = generate(num_queries=QUERIES_PER_FILE, docs_per_query=6, num_features=10 + index, seed=index)
        for folder in (whole, hosts[index % 2]):
            write_letor(data, folder, with_qid=True, name=f"part-{index}.txt")
    write_letor(generate(num_queries=16, docs_per_query=6, num_features=12, seed=99), root / "validation",
                with_qid=True)
    return whole, hosts, root / "validation"


@pytest.fixture(scope="module")
def replicated_model(tmp_path_factory, channels) -> dict[str, torch.Tensor]:
    """The weights of the whole channel trained on one host (FullyReplicated): what fits the input encoding on all of
    it. One run for both entry points: they fit it with the same data code (test_training_runs checks their loops
    agree)."""
    whole, _, validation = channels
    replicated = run_dirs(tmp_path_factory.mktemp("replicated"))
    run_script("train_ddp.py", [*replicated.flags(), "--train", str(whole), "--validation", str(validation), *FLAGS])
    return load_file(replicated.model_dir / "model.safetensors")


@pytest.mark.parametrize(("script", "ranks_per_host"), [("train_ddp.py", 2), ("train_lightning.py", 1)])
def test_two_hosts_train_every_query_once_and_fit_the_encoding_on_both(script, ranks_per_host, channels,
                                                                        replicated_model, tmp_path):
    _, hosts, validation = channels
    # Given each host's share of the training files, and the whole channel trained on one host (FullyReplicated)
    shares = [[*run_dirs(tmp_path / f"host-{index}").flags(), "--train", str(share), "--validation",
               str(validation), *FLAGS] for index, share in enumerate(hosts)]
    # When the sharded job runs, its input data config saying the train channel is ShardedByS3Key
    results = run_hosts(script, shares, ranks_per_host, SM_INPUT_DATA_CONFIG=SHARDED)
    # Then rank 0 reports every rank's share: together, each training query once, all ranks the same steps
    [agreement] = AGREEMENT.findall(results[0].stdout)
    total, ranks, per_rank, _, _, width = agreement
    assert int(ranks) == 2 * ranks_per_host
    assert sum(int(count) for count in per_rank.split(", ")) == int(total.replace(",", "")) == FILES * QUERIES_PER_FILE
    assert int(width) == 10 + FILES - 1
    # And the model's input encoding is the one the whole channel gives, though no host held all of it
    sharded_model = load_file(run_dirs(tmp_path / "host-0").model_dir / "model.safetensors")
    for name in ("encoding.lower_edges", "encoding.inverse_widths"):
        torch.testing.assert_close(sharded_model[name], replicated_model[name])
    last_line = results[0].stdout.strip().splitlines()[-1]
    assert 0 < parse_metrics(last_line).get("val_ndcg@10", -1) <= 1, f"the log's last line is not the final metrics: {last_line}"
