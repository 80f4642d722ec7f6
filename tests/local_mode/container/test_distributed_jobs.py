"""Multi-process jobs launched as the SageMaker PyTorch toolkit launches them, on local hosts and gloo."""

from __future__ import annotations

import pytest
from model_archives import model_json

from local_mode.aws.s3_transfer import split_s3_uri

pytestmark = pytest.mark.slow

TORCH_DISTRIBUTED = {"sagemaker_torch_distributed_enabled": "true", "sagemaker_instance_type": '"ml.m5.xlarge"'}
SMDDP = {"sagemaker_distributed_dataparallel_enabled": "true", "sagemaker_instance_type": '"ml.m5.xlarge"',
         "sagemaker_distributed_dataparallel_custom_mpi_options": '""'}


@pytest.mark.parametrize(("job_name", "distribution"), [("dist-torchrun", TORCH_DISTRIBUTED), ("dist-mpi", SMDDP)],
                         ids=["torchrun per host", "mpi-style ranks"])
def test_two_hosts_form_one_gloo_group(sagemaker, s3, training_request, wait_for_end, report_job, jobs_dir, job_name,
                                       distribution):
    # Given a job on two instances: torch_distributed (one torchrun per host, --nnodes 2) or smdistributed-style
    # (ranks from OMPI_COMM_WORLD_* variables, meeting through MASTER_ADDR/MASTER_PORT; no Open MPI here)
    request = training_request(job_name, "gloo_allreduce.py", instance_count=2, distribution=distribution)

    # When it runs
    sagemaker.create_training_job(**request)
    description = wait_for_end(job_name)

    # Then both ranks joined one group and the all-reduce summed ranks 0 and 1
    assert description["TrainingJobStatus"] == "Completed", report_job(jobs_dir, job_name,
                                                                        description.get("FailureReason"))
    assert model_json(s3, description["ModelArtifacts"]["S3ModelArtifacts"], "allreduce.json") == {
        "world_size": 2, "sum": 1.0}


def test_checkpoints_sync_to_s3_and_a_rerun_resumes_from_them(sagemaker, s3, training_request, wait_for_end):
    # Given a job with a CheckpointConfig that ran once
    checkpoint_uri = "s3://local-mode-test-artifacts/checkpoints/resume/"
    sagemaker.create_training_job(**training_request("ckpt-first", "write_model.py", checkpoint_uri=checkpoint_uri))
    wait_for_end("ckpt-first")

    # When a second job with the same checkpoint URI starts
    sagemaker.create_training_job(**training_request("ckpt-second", "write_model.py", checkpoint_uri=checkpoint_uri,
                                                     hyperparameters={"epochs": "5"}))
    wait_for_end("ckpt-second")

    # Then the first job's checkpoint reached S3, and the second found it in its checkpoint folder
    bucket, key = split_s3_uri(checkpoint_uri)
    assert s3.get_object(Bucket=bucket, Key=key + "last.txt")["Body"].read() == b"epoch 5"
    assert model_json(s3, description_of(sagemaker, "ckpt-second"), "model.json")["resumed"] == "epoch 3"


def description_of(sagemaker, name: str) -> str:
    return sagemaker.describe_training_job(TrainingJobName=name)["ModelArtifacts"]["S3ModelArtifacts"]


def failure_reason(sagemaker, wait_for_end, request: dict) -> str:
    """Runs the job to its end, which must be a failure, and returns its FailureReason."""
    sagemaker.create_training_job(**request)
    description = wait_for_end(request["TrainingJobName"])
    assert description["TrainingJobStatus"] == "Failed"
    return description["FailureReason"]


def test_a_rank_killed_by_a_signal_is_named_in_the_failure_reason(sagemaker, training_request, wait_for_end):
    # Given a torchrun job on two hosts whose last rank is killed by SIGKILL, leaving no traceback of its own
    request = training_request("dist-killed", "killed_rank.py", instance_count=2, distribution=TORCH_DISTRIBUTED)

    # When it runs
    reason = failure_reason(sagemaker, wait_for_end, request)

    # Then the reason names that rank and its signal, as torchrun reported them, not torchrun's own traceback
    assert "torchrun root cause: rank 1 (local_rank: 0) exited with exitcode -9" in reason, reason
    assert "Signal 9 (SIGKILL)" in reason, reason
    assert "ChildFailedError" not in reason, reason


def test_a_python_error_under_torchrun_is_reported_as_the_script_raised_it(sagemaker, training_request, wait_for_end):
    # Given a torchrun job whose script raises
    request = training_request("dist-raises", "fail.py", distribution=TORCH_DISTRIBUTED)

    # When it runs
    reason = failure_reason(sagemaker, wait_for_end, request)

    # Then the reason is the script's error and the rank torchrun saw fail, not torchrun's own traceback
    assert "ValueError: rank.train line 7" in reason, reason
    assert "torchrun root cause: rank 0 (local_rank: 0) exited with exitcode 1" in reason, reason
    assert "ChildFailedError" not in reason, reason
