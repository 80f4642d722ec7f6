"""Both entry points on a training channel sharded across two hosts (SageMaker's ShardedByS3Key), each host a
torchrun of its own holding half of the channel's files, as the toolkit starts them: every training query is
trained by exactly one rank, and what is fitted on the training data comes from both hosts."""

from __future__ import annotations

import json
import re

import pytest
import torch
from ranker.config import parse_config
from ranker.data.channels import load_channel
from ranker.data.synthetic import generate, write_letor
from ranker.log_format import parse_metrics
from ranker.model.encoding import PiecewiseLinearEncoding
from safetensors.torch import load_file
from training_launch import TINY_MODEL_FLAGS, run_dirs, run_hosts

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
def whole_channel_encoding(channels) -> dict[str, torch.Tensor]:
    """The input encoding that the whole training channel gives, as a run holding all of it (FullyReplicated) fits it:
    the channel's rows as the session's reader loads them, at the run's bins, through the model's own encoding. (A
    run of the whole channel on one host exports these edges; they depend on nothing but the rows and the bins, so
    the reference needs no run of its own.)"""
    whole, _, validation = channels
    config = parse_config(["--train", str(whole), "--validation", str(validation), *FLAGS], env={})
    rows = load_channel(whole).features
    fitted = PiecewiseLinearEncoding(rows.shape[1], config.model.bins).fit(rows, config.train.seed)
    return {f"encoding.{name}": value for name, value in fitted.state_dict().items()}


@pytest.mark.parametrize(("script", "ranks_per_host"), [("train_ddp.py", 2), ("train_lightning.py", 1)])
def test_two_hosts_train_every_query_once_and_fit_the_encoding_on_both(script, ranks_per_host, channels,
                                                                        whole_channel_encoding, tmp_path):
    _, hosts, validation = channels
    # Given each host's share of the training files, and the encoding the whole channel gives (FullyReplicated)
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
        torch.testing.assert_close(sharded_model[name], whole_channel_encoding[name])
    last_line = results[0].stdout.strip().splitlines()[-1]
    assert 0 < parse_metrics(last_line).get("val_ndcg@10", -1) <= 1, f"the log's last line is not the final metrics: {last_line}"
