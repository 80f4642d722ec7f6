"""The ranker on a training channel sharded across two hosts, through the whole local pipeline: a dataset version
whose manifest asks for `ShardedByS3Key`, the trigger's request, local SageMaker dealing the files to the hosts, and
both entry points training on their hosts' shares. The native script's same job with the channel replicated is the
reference for both: the two loops train alike (tests/training/test_training_runs.py)."""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from ranker.data.synthetic import generate, write_letor

from local_mode.pipeline import LocalPipeline
from small_model import SMALL_MODEL

pytestmark = pytest.mark.slow

FILES = 8
QUERIES_PER_FILE = 32
AGREEMENT = re.compile(r"train channel ShardedByS3Key: ([0-9,]+) training queries held by 2 ranks")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> dict[str, Path]:
    """Eight training files with qid columns and a validation channel, small enough for CPU ranks."""
    root = tmp_path_factory.mktemp("sharded-dataset")
    for index in range(FILES):
        write_letor(generate(num_queries=QUERIES_PER_FILE, docs_per_query=16, num_features=20, seed=index),
                    root / "train", with_qid=True, name=f"part-{index}.txt")
    write_letor(generate(num_queries=300, docs_per_query=16, num_features=20, seed=999), root / "validation",
                with_qid=True)
    return {"train": root / "train", "validation": root / "validation"}


def train(pipeline: LocalPipeline, dataset: dict[str, Path], entry_point: str, distribution: str) -> dict[str, Any]:
    """A two-host torchrun job on `dataset` whose train channel is spread as `distribution` says, to its end."""
    manifest = {"training": {"entry_point": entry_point, "distribution": "torch_distributed",
                             "instance_type": "ml.g5.12xlarge", "instance_count": 2,
                             "train_data_distribution": distribution, "hyperparameters": {"epochs": 4, **SMALL_MODEL}}}
    marker = pipeline.upload_channels(dataset, dataset="sharded", version=f"v-{uuid.uuid4().hex[:8]}",
                                      manifest=manifest)
    result = pipeline.deliver(marker)
    assert result["status"] == "started", result
    description = pipeline.wait(result["job_name"])
    assert description["TrainingJobStatus"] == "Completed", description.get("FailureReason")
    return description


def host_files(pipeline: LocalPipeline, job_name: str, host: str) -> list[str]:
    return sorted(path.name for path in (pipeline.jobs_dir / job_name / host / "input/data/train").iterdir())


def validation_ndcg(description: dict[str, Any]) -> float:
    return next(metric["Value"] for metric in description["FinalMetricDataList"]
                if metric["MetricName"] == "val_ndcg@10")


@pytest.fixture(scope="module")
def replicated(demo_pipeline, dataset) -> dict[str, Any]:
    """The reference: the native script's two-host job with the train channel replicated to both hosts."""
    return train(demo_pipeline, dataset, "train_ddp.py", "FullyReplicated")


@pytest.mark.parametrize("entry_point", ["train_ddp.py", "train_lightning.py"])
def test_two_hosts_on_their_halves_train_like_two_hosts_on_the_whole_channel(entry_point, demo_pipeline, dataset,
                                                                             replicated):
    # Given a dataset version of eight training files and a validation channel
    # When a two-host job runs on it with the train channel sharded by key (the reference: the job replicated)
    sharded = train(demo_pipeline, dataset, entry_point, "ShardedByS3Key")
    # Then each host of the sharded job got half of the files, none twice, and each of the replicated job all
    halves = [host_files(demo_pipeline, sharded["TrainingJobName"], host) for host in ("algo-1", "algo-2")]
    assert [len(half) for half in halves] == [FILES // 2, FILES // 2]
    assert sorted(halves[0] + halves[1]) == sorted(path.name for path in dataset["train"].iterdir())
    assert len(host_files(demo_pipeline, replicated["TrainingJobName"], "algo-2")) == FILES
    # And together the two ranks trained on every training query of the channel
    log = (demo_pipeline.jobs_dir / sharded["TrainingJobName"] / "algo-1" / "training.log").read_text()
    assert AGREEMENT.search(log).group(1) == f"{FILES * QUERIES_PER_FILE:,}"
    # And the model ranks the validation queries as well as the replicated job's
    assert validation_ndcg(sharded) == pytest.approx(validation_ndcg(replicated), abs=0.01)
    assert validation_ndcg(sharded) > 0.8
