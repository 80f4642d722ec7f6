"""Local mode's container contract against the real sagemaker-training toolkit on the same host folder.

The toolkit reads /opt/ml from SAGEMAKER_BASE_DIR, computes the SM_* environment and user arguments, and starts
the entry point; if local mode's folder layout or environment drifted from its contract, the two would differ.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from local_mode.job_runtime.artifacts import tar_folder_contents
from local_mode.aws.s3_transfer import split_s3_uri

pytestmark = pytest.mark.slow

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"

RUN_UNDER_TOOLKIT = """
from sagemaker_training import entry_point, environment
env = environment.Environment()
entry_point.run(uri=BUNDLE, user_entry_point=env.user_entry_point, args=env.to_cmd_args(),
                env_vars=env.to_env_vars(), capture_error=True)
"""


def test_the_toolkit_sees_the_same_environment_as_local_mode(sagemaker, s3, training_request, wait_for_end,
                                                             tmp_path):
    # Given a two-host job whose script records its SM_* environment and arguments, launched by a tuning job (which
    # adds the objective's hyperparameter)
    request = training_request("contract", "env_dump.py", instance_count=2,
                               hyperparameters={"flag": "true", "rate": "0.5",
                                                                "_tuning_objective_metric": "val_ndcg@10"})
    sagemaker.create_training_job(**request)
    description = wait_for_end("contract")
    assert description["TrainingJobStatus"] == "Completed", description.get("FailureReason")
    bucket, key = split_s3_uri(description["ModelArtifacts"]["S3ModelArtifacts"])
    with tarfile.open(fileobj=io.BytesIO(s3.get_object(Bucket=bucket, Key=key)["Body"].read())) as tar:
        local_mode_saw = json.loads(tar.extractfile("environment.json").read())

    # When the real toolkit starts the same entry point on algo-1's folder
    host_folder = tmp_path / "jobs" / "contract" / "algo-1"
    bundle = tar_folder_contents(SCRIPTS, tmp_path / "bundle" / "sourcedir.tar.gz")
    dump = tmp_path / "toolkit-environment.json"
    clean = {name: value for name, value in os.environ.items() if not name.startswith(("SM_", "SAGEMAKER_"))}
    subprocess.run([sys.executable, "-c", f"BUNDLE = {str(bundle)!r}\n{RUN_UNDER_TOOLKIT}"], check=True,
                   env={**clean, "SAGEMAKER_BASE_DIR": str(host_folder), "SM_STUDIO_LOCAL_MODE": "true",
                        "TRAINING_JOB_NAME": "contract", "ENV_DUMP": str(dump)}, capture_output=True, timeout=60)
    toolkit_saw = json.loads(dump.read_text())

    # Then the arguments and every SM_* variable agree (the training env as a whole, decoded, on shared keys)
    assert local_mode_saw["argv"] == toolkit_saw["argv"] == ["--epochs", "3", "--flag", "True", "--loss", "listnet",
                                                             "--rate", "0.5"]
    ours, theirs = local_mode_saw["environment"], toolkit_saw["environment"]
    theirs.pop("SM_STUDIO_LOCAL_MODE")  # this test's own switch, not part of the contract
    ours_training_env, theirs_training_env = json.loads(ours.pop("SM_TRAINING_ENV")), json.loads(
        theirs.pop("SM_TRAINING_ENV"))
    assert {name: value for name, value in ours.items() if name in theirs} == {
        name: value for name, value in theirs.items() if name in ours}
    assert sorted(set(theirs) - set(ours)) == []
    assert {key: value for key, value in ours_training_env.items()} == {
        key: theirs_training_env[key] for key in ours_training_env}
    assert json.loads(ours["SM_HOSTS"]) == ["algo-1", "algo-2"]
