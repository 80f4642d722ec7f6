"""Training faults as SageMaker meets them, on real processes (torchrun, gloo on CPU): a rank killed outright, a
spot interruption's SIGTERM to every rank, and corrupt datasets, both from the script and through the local
SageMaker endpoint's job runner.

Every interrupted run is compared with one uninterrupted run of the same flags, tensor by tensor.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from ranker.data import synthetic
from ranker.data.channels import DataError, load_channel
from training_launch import TINY_MODEL_FLAGS, run_dirs, script_env

from local_mode.job_runtime.artifacts import tar_folder_contents
from local_mode.aws.local_clients import local_client
from local_mode.pipeline import wait_for_job
from reliability.local_dataset import ARTIFACTS_BUCKET, DATA_BUCKET
from reliability.torchrun_job import (
    TRAINING_CODE,
    run_torchrun,
    start_torchrun,
    wait_for_first_checkpoint,
    wait_for_ranks,
)

pytestmark = pytest.mark.slow

# 32 queries, 2 ranks x 2 queries a step: 8 steps an epoch, 240 tiny steps, a checkpoint every 16. Dropout stays on,
# so a resumed run only matches if every rank's RNG stream was saved and restored.
RESUMABLE = ["--batch-size", "2", "--max-steps", "240", "--checkpoint-every", "16", *TINY_MODEL_FLAGS,
             "--width", "32", "--dropout", "0.2"]
RESUMED = re.compile(r"resumed from \S+ at step (\d+)")


def assert_same_weights(first: dict[str, torch.Tensor], second: dict[str, torch.Tensor]) -> None:
    assert first.keys() == second.keys()
    for name in first:
        torch.testing.assert_close(first[name], second[name], atol=1e-6, rtol=1e-5, msg=f"weights {name} differ")


@pytest.fixture(scope="module")
def channel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("channel")
    synthetic.main(["--output", str(folder), "--queries", "32", "--docs-per-query", "8", "--features", "12",
                    "--seed", "5"])
    return folder


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory, channel: Path):
    dirs = run_dirs(tmp_path_factory.mktemp("uninterrupted"))
    run_torchrun("train_ddp.py", ["--train", str(channel), *RESUMABLE, *dirs.flags()])
    return dirs


def test_a_rank_killed_mid_run_restarts_resumes_and_ends_like_an_uninterrupted_run(tmp_path, channel, uninterrupted):
    # Given a 2-rank torchrun job allowed one restart, past its first checkpoint
    dirs = run_dirs(tmp_path)
    job = start_torchrun("train_ddp.py", ["--train", str(channel), *RESUMABLE, *dirs.flags()], max_restarts=1)
    wait_for_first_checkpoint(job, dirs)
    # When rank 1 is killed outright (no chance to save: a crashed process or a lost host)
    victim = wait_for_ranks(job, 2)[1]
    os.kill(victim, signal.SIGKILL)
    output, _ = job.communicate(timeout=120)
    # Then torchrun restarted the workers, which resumed mid-run from a checkpoint, and the job succeeded
    assert job.returncode == 0, output[-4000:]
    resumed_at = [int(step) for step in RESUMED.findall(output)]
    assert len(resumed_at) == 1 and 0 < resumed_at[0] < 240, output[-4000:]
    # And it ends with the uninterrupted run's weights
    assert_same_weights(dirs.weights(), uninterrupted.weights())


@pytest.mark.parametrize("script", ["train_ddp.py", "train_lightning.py"])
def test_sigterm_to_every_rank_checkpoints_then_a_second_run_finishes_identically(tmp_path, channel, uninterrupted,
                                                                                  script):
    # Given a 2-rank torchrun job past its first checkpoint (both loops train identically: the uninterrupted run is
    # the native one)
    dirs = run_dirs(tmp_path)
    args = ["--train", str(channel), *RESUMABLE, *dirs.flags()]
    job = start_torchrun(script, args, max_restarts=0)
    wait_for_first_checkpoint(job, dirs, script)
    # When every rank gets SIGTERM (SageMaker's notice before a spot interruption)
    for pid in wait_for_ranks(job, 2).values():
        os.kill(pid, signal.SIGTERM)
    output, _ = job.communicate(timeout=60)
    # Then the ranks agreed on a step, wrote a checkpoint at it and exited cleanly without a model
    assert job.returncode == 0, output[-4000:]
    stopped_at = int(re.search(r"SIGTERM: checkpoint written at step (\d+)", output).group(1))
    assert checkpointed_step(script, dirs.checkpoint_dir) == stopped_at
    assert not (dirs.model_dir / "model.safetensors").exists()
    # When the job runs again with the same flags, Then it resumes there and ends like the uninterrupted run
    rerun = run_torchrun(script, args)
    assert [int(step) for step in RESUMED.findall(rerun)] == [stopped_at]
    assert_same_weights(dirs.weights(), uninterrupted.weights())


def checkpointed_step(script: str, folder: Path) -> int:
    """The step of the checkpoint a SIGTERM left: ranker.training.checkpoint's newest file, or Lightning's `last.ckpt`."""
    if script == "train_lightning.py":
        return torch.load(folder / "last.ckpt", map_location="cpu", weights_only=True)["global_step"]
    return int(max(folder.glob("step-*.pt")).stem.removeprefix("step-"))


def _rewrite_line(path: Path, number: int, change: Callable[[str], str]) -> None:
    lines = path.read_text().splitlines(keepends=True)
    lines[number - 1] = change(lines[number - 1])
    path.write_text("".join(lines))


def _cut_a_feature_value(line: str) -> str:
    return line[: line.index(":", line.index(":") + 1) + 1] + "\n"  # `0 1:0.04 2:` : the value is gone


def _nan_in_the_third_feature(line: str) -> str:
    fields = line.split()
    fields[3] = fields[3].split(":")[0] + ":nan"
    return " ".join(fields) + "\n"


# name: (how the channel is broken, message the script must fail with; {channel} is the channel folder)
CORRUPTIONS: dict[str, tuple[Callable[[Path], None], str]] = {
    "truncated line": (lambda folder: _rewrite_line(folder / "rank.train", 5, _cut_a_feature_value),
                       "{channel}/rank.train:5: not a LETOR row: the value '' of '"),
    "not a row": (lambda folder: _rewrite_line(folder / "rank.train", 3, lambda line: "5;0.2244\n"),
                  "{channel}/rank.train:3: not a LETOR row: the label '5;0.2244' is not a number; each line must be "
                  "`label [qid:Q] index:value ...`"),
    "NaN value": (lambda folder: _rewrite_line(folder / "rank.train", 7, _nan_in_the_third_feature),
                  "{channel}/rank.train:7: NaN or infinite value"),
    "mismatched query file": (lambda folder: _rewrite_line(folder / "rank.train.query", 3, lambda line: "7\n"),
                              "{channel}/rank.train.query: query sizes add up to 255 rows but the data file has 256"),
    "empty channel": (lambda folder: [file.write_text("") for file in folder.iterdir()],
                      "channel {channel}: no LETOR text files or binary shards found"),
}


def corrupt_copy(channel: Path, destination: Path, corruption: str) -> Path:
    destination.mkdir(parents=True)
    for file in channel.iterdir():
        (destination / file.name).write_bytes(file.read_bytes())
    CORRUPTIONS[corruption][0](destination)
    return destination


@pytest.mark.parametrize("corruption", list(CORRUPTIONS))
def test_a_corrupt_channel_is_refused_naming_file_and_line(channel, tmp_path, corruption):
    # Given a corrupt copy of the channel, small enough that the script reads it in its own process, as here (the
    # parser's worker processes start only for a file of ranker.data.letor_processes.MIN_BYTES_PER_PROCESS or more)
    broken = corrupt_copy(channel, tmp_path / "train", corruption)
    # When the session's reader loads it, Then it refuses it with a DataError, the script's usage error (exit status
    # 2, the message alone in the failure file: the next test), whose one line names the file and line
    with pytest.raises(DataError) as refused:
        load_channel(broken)
    assert str(refused.value).startswith(CORRUPTIONS[corruption][1].format(channel=broken))
    assert "\n" not in str(refused.value)


def test_a_corrupt_channel_fails_the_script_naming_file_and_line(channel, tmp_path):
    # Given a channel with a truncated line (the reader's other refusals end the script the same way: each is a
    # DataError, which the entry point's failure_reported turns into its usage error)
    broken, output_dir = corrupt_copy(channel, tmp_path / "train", "truncated line"), tmp_path / "output"
    expected = CORRUPTIONS["truncated line"][1].format(channel=broken)
    # When the native script runs on it as SageMaker's container runs it (one process, SM_OUTPUT_DIR set)
    finished = subprocess.run(
        [sys.executable, "train_ddp.py", "--train", str(broken), *TINY_MODEL_FLAGS, *run_dirs(tmp_path).flags()],
        cwd=TRAINING_CODE, env=script_env(SM_OUTPUT_DIR=str(output_dir)), capture_output=True, text=True, timeout=120)
    log = finished.stderr
    # Then the script exits with the usage status and the message in its log, without a traceback
    assert finished.returncode == 2
    assert f"error: {expected}" in log and "Traceback" not in log, log[-3000:]
    # And it wrote that message, alone, to /opt/ml/output/failure for SageMaker's FailureReason
    failure = (output_dir / "failure").read_text()
    assert failure.startswith(f"DataError: {expected}") and "\n" not in failure
    assert not (tmp_path / "model" / "model.safetensors").exists()


def test_a_job_on_a_corrupt_channel_fails_with_the_reason_through_local_sagemaker(moto, local_sagemaker, channel,
                                                                                   tmp_path):
    # Given the training code as the stack uploads it, and a channel whose row 7 holds a NaN
    s3 = local_client("s3", moto.url)
    bundle = tar_folder_contents(TRAINING_CODE, tmp_path / "sourcedir.tar.gz")
    s3.upload_file(str(bundle), ARTIFACTS_BUCKET, "code/training-faults/sourcedir.tar.gz")
    broken = corrupt_copy(channel, tmp_path / "nan", "NaN value")
    for file in broken.iterdir():
        s3.upload_file(str(file), DATA_BUCKET, f"datasets/corrupt/v1/train/{file.name}")
    sagemaker = local_client("sagemaker", local_sagemaker.url)
    # When a job runs train_ddp.py on it
    sagemaker.create_training_job(**sdk_shaped_request("corrupt-channel", "train_ddp.py"))
    description = wait_for_job(sagemaker, "corrupt-channel", timeout=120)
    # Then it is Failed, and FailureReason carries the script's message naming the line of the S3 object the channel
    # file is a copy of (the host folder local mode stands in for /opt/ml/input/data means nothing to a user)
    assert description["TrainingJobStatus"] == "Failed"
    reason = description["FailureReason"]
    assert reason.startswith("AlgorithmError: ExecuteUserScriptError:\nExitCode 2\n"), reason
    assert reason.endswith(f'ErrorMessage "DataError: s3://{DATA_BUCKET}/datasets/corrupt/v1/train/rank.train:7: NaN '
                           'or infinite value; fix or drop that row"'), reason


def test_a_file_cut_mid_number_is_refused_naming_its_last_line(channel, tmp_path):
    # Given a channel whose data file stops inside a number of its last row (a copy or upload cut short): with a
    # group file or a qid column the cut row still parses, and only the missing newline tells
    data = (channel / "rank.train").read_bytes()
    last_row = data.rindex(b"\n", 0, len(data) - 1) + 1
    cut = tmp_path / "rank.train"
    cut.write_bytes(data[: data.index(b".", last_row + 10) + 2])
    (tmp_path / "rank.train.query").write_bytes((channel / "rank.train.query").read_bytes())
    cut_line = data[:last_row].count(b"\n") + 1
    # When the channel is read, Then the error names the file and the cut line
    with pytest.raises(ValueError, match=rf"{re.escape(str(cut))}:{cut_line}: the last row has no newline"):
        load_channel(tmp_path)


def sdk_shaped_request(name: str, entry_point: str) -> dict[str, Any]:
    """CreateTrainingJob as SageMaker Python SDK v2's PyTorch estimator sends it (hyperparameters JSON-encoded)."""
    return {
        "TrainingJobName": name,
        "AlgorithmSpecification": {"TrainingImage": "local/pytorch-training:2.2.0-cpu-py310",
                                   "TrainingInputMode": "File"},
        "RoleArn": "arn:aws:iam::123456789012:role/local-training",
        "HyperParameters": {"max-steps": "8", "width": "32", "sagemaker_program": json.dumps(entry_point),
                            "sagemaker_submit_directory": json.dumps(
                                f"s3://{ARTIFACTS_BUCKET}/code/training-faults/sourcedir.tar.gz"),
                            "sagemaker_container_log_level": "20", "sagemaker_job_name": json.dumps(name),
                            "sagemaker_region": json.dumps("us-east-1")},
        "InputDataConfig": [{"ChannelName": "train", "DataSource": {"S3DataSource": {
            "S3DataType": "S3Prefix", "S3Uri": f"s3://{DATA_BUCKET}/datasets/corrupt/v1/train/",
            "S3DataDistributionType": "FullyReplicated"}}}],
        "OutputDataConfig": {"S3OutputPath": f"s3://{ARTIFACTS_BUCKET}/models/"},
        "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
        "StoppingCondition": {"MaxRuntimeInSeconds": 600},
    }


