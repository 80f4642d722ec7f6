"""In a container profile's environment, local mode installs the bundle's requirements before launch, as the
toolkit does in the container, and a failed install fails the job as the service reports it."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from local_mode.job_runtime.artifacts import tar_folder_contents
from local_mode.job_runtime.job_runner import RunnerSettings
from local_mode.aws.local_clients import local_account_id, local_client
from local_mode.aws.moto_endpoint import MotoEndpoint
from local_mode.pipeline import wait_for_job
from local_mode.sagemaker_api.sagemaker_endpoint import LocalSageMaker
from local_mode.sagemaker_api.training_job_service import TrainingJobService

pytestmark = pytest.mark.slow

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
ARTIFACTS_BUCKET = "local-mode-test-artifacts"  # created by conftest's moto fixture


@pytest.fixture
def installing_sagemaker(moto: MotoEndpoint, tmp_path: Path) -> Iterator[object]:
    """Local SageMaker whose jobs install requirements.txt first, with this Python standing in for the profile's."""
    service = TrainingJobService(
        s3_endpoint_url=moto.url, account_id=local_account_id(moto.url),
        settings=RunnerSettings(work_dir=tmp_path / "jobs", stop_grace_seconds=5, python=sys.executable,
                                install_requirements=True))
    with LocalSageMaker(service) as endpoint:
        yield local_client("sagemaker", endpoint.url)


def _bundle_with_requirements(moto: MotoEndpoint, tmp_path: Path, name: str, requirements: str) -> str:
    source = tmp_path / "source"
    source.mkdir()
    (source / "write_model.py").write_bytes((SCRIPTS / "write_model.py").read_bytes())
    (source / "requirements.txt").write_text(requirements)
    bundle = tar_folder_contents(source, tmp_path / "sourcedir.tar.gz")
    local_client("s3", moto.url).upload_file(str(bundle), ARTIFACTS_BUCKET, f"code/{name}/sourcedir.tar.gz")
    return f"s3://{ARTIFACTS_BUCKET}/code/{name}/sourcedir.tar.gz"


def _request(training_request, name: str, bundle_uri: str) -> dict:
    request = training_request(name, "write_model.py")
    request["HyperParameters"]["sagemaker_submit_directory"] = f'"{bundle_uri}"'
    return request


def test_requirements_are_installed_before_launch(installing_sagemaker, moto, training_request, tmp_path):
    # Given a bundle whose requirements the environment already satisfies (no index needed)
    uri = _bundle_with_requirements(moto, tmp_path, "satisfied", "tqdm\n")
    # When its job runs
    installing_sagemaker.create_training_job(**_request(training_request, "install-ok", uri))
    description = wait_for_job(installing_sagemaker, "install-ok", timeout=120)
    # Then pip ran in the code folder before the script, which completed
    assert description["TrainingJobStatus"] == "Completed", description.get("FailureReason")
    log = next((tmp_path / "jobs" / "install-ok").glob("algo-1/training.log")).read_text()
    assert "Requirement already satisfied: tqdm" in log


def test_a_failed_install_fails_the_job_before_launch(installing_sagemaker, moto, training_request, tmp_path):
    # Given a bundle whose requirements cannot install
    uri = _bundle_with_requirements(moto, tmp_path, "broken", "./no-such-package\n")
    # When its job runs
    installing_sagemaker.create_training_job(**_request(training_request, "install-bad", uri))
    description = wait_for_job(installing_sagemaker, "install-bad", timeout=120)
    # Then it failed as the container reports it, and the script never started
    assert description["TrainingJobStatus"] == "Failed"
    assert description["FailureReason"].startswith("AlgorithmError: InstallRequirementsError:")
    assert "no-such-package" in description["FailureReason"]
    assert not list((tmp_path / "jobs" / "install-bad").glob("algo-1/model/*"))
