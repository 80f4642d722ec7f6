"""Local AWS for the reliability tests: moto's server (S3, SNS, SQS) holding one complete dataset version, a local
SageMaker endpoint per test, and the trigger's own clients pointed at them through AWS_ENDPOINT_URL_<SERVICE>.

The trigger runs in this process, as its Lambda would run it: `handler.lambda_handler` with the stack's environment.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

# Powertools reads its service name and namespace when the trigger's modules are imported, before any fixture.
os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "training-trigger")
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "RankerTraining")

PROJECT_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(PROJECT_ROOT / "tests" / "unit"))  # the trigger tests' stack environment and sample events
sys.path.insert(0, str(PROJECT_ROOT / "tests" / "training"))  # the training tests' launch helpers (training_launch)

from training_trigger import aws_clients  # noqa: E402
from training_trigger.settings import load_settings  # noqa: E402
from trigger.sample_inputs import stack_environ, write_stack_settings  # noqa: E402

from local_mode.job_runtime.artifacts import tar_folder_contents  # noqa: E402
from local_mode.aws.bucket_events import object_created_event  # noqa: E402
from local_mode.job_runtime.job_runner import RunnerSettings  # noqa: E402
from local_mode.aws.local_clients import (  # noqa: E402
    LOCAL_REGION,
    dummy_credentials_environment,
    local_account_id,
    local_client,
)
from local_mode.aws.moto_endpoint import MotoEndpoint  # noqa: E402
from local_mode.sagemaker_api.sagemaker_endpoint import LocalSageMaker  # noqa: E402
from local_mode.sagemaker_api.training_job_service import TrainingJobService  # noqa: E402
from reliability.local_dataset import (  # noqa: E402
    ARTIFACTS_BUCKET,
    DATA_BUCKET,
    MARKER_KEY,
    SOURCE_BUNDLE_KEY,
    VERSION_ROOT,
)

# The job the local SageMaker runs for a started trigger: the entry point only has to exist and exit 0.
ENTRY_POINT_SOURCE = "print('reliability test job: started by the trigger')\n"


@pytest.fixture(scope="session")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoEndpoint]:
    """moto's server with the data bucket (one complete version: train, validation, marker) and a code bundle."""
    with MotoEndpoint() as endpoint:
        endpoint.create_buckets([DATA_BUCKET, ARTIFACTS_BUCKET])
        s3 = local_client("s3", endpoint.url)
        for channel in ("train", "validation"):
            s3.put_object(Bucket=DATA_BUCKET, Key=f"{VERSION_ROOT}{channel}/rank.{channel}",
                          Body=b"2 qid:1 1:0.5 2:0.1\n0 qid:1 1:0.2 2:0.9\n")
        s3.put_object(Bucket=DATA_BUCKET, Key=MARKER_KEY, Body=b"")
        code = tmp_path_factory.mktemp("code")
        (code / "train_lightning.py").write_text(ENTRY_POINT_SOURCE)
        bundle = tar_folder_contents(code, tmp_path_factory.mktemp("bundle") / "sourcedir.tar.gz")
        s3.upload_file(str(bundle), ARTIFACTS_BUCKET, SOURCE_BUNDLE_KEY)
        yield endpoint


@pytest.fixture(scope="session")
def account(moto: MotoEndpoint) -> str:
    return local_account_id(moto.url)


@pytest.fixture(scope="session")
def topic_arn(moto: MotoEndpoint) -> str:
    return local_client("sns", moto.url).create_topic(Name="reliability-training-rejections")["TopicArn"]


@pytest.fixture
def local_sagemaker(moto: MotoEndpoint, account: str, tmp_path: Path) -> Iterator[LocalSageMaker]:
    service = TrainingJobService(s3_endpoint_url=moto.url, account_id=account,
                                 settings=RunnerSettings(work_dir=tmp_path / "jobs", stop_grace_seconds=5))
    with LocalSageMaker(service) as endpoint:
        yield endpoint


def trigger_environment(*, account: str, topic_arn: str, s3_url: str, sagemaker_url: str,
                        settings_dir: Path) -> dict[str, str]:
    """The stack's environment and settings file (written to `settings_dir`) for a one-process job on the local
    endpoints, as local mode deploys it."""
    settings_file = write_stack_settings(settings_dir, default_distribution="none",
                                         default_instance_type="ml.m5.xlarge", use_spot=False, max_wait_seconds=0,
                                         max_runtime_seconds=600)["STATIC_SETTINGS_FILE"]
    return {
        **stack_environ(
            AWS_REGION=LOCAL_REGION, NOTIFICATION_TOPIC_ARN=topic_arn, DATA_BUCKET=DATA_BUCKET,
            ARTIFACTS_BUCKET=ARTIFACTS_BUCKET, OUTPUT_S3_URI=f"s3://{ARTIFACTS_BUCKET}/models/",
            CHECKPOINT_S3_URI=f"s3://{ARTIFACTS_BUCKET}/checkpoints/",
            ROLE_ARN=f"arn:aws:iam::{account}:role/ranker-sagemaker-execution",
            SOURCE_BUNDLE_URI=f"s3://{ARTIFACTS_BUCKET}/{SOURCE_BUNDLE_KEY}", STATIC_SETTINGS_FILE=settings_file),
        **dummy_credentials_environment(),
        "AWS_ENDPOINT_URL_S3": s3_url, "AWS_ENDPOINT_URL_SNS": s3_url, "AWS_ENDPOINT_URL_SAGEMAKER": sagemaker_url,
    }


def _fresh_trigger_state() -> None:
    """Forget the trigger's cached settings and clients, so the next use reads the current environment."""
    load_settings.cache_clear()
    for client in (aws_clients.sagemaker_client, aws_clients.s3_client, aws_clients.sns_client):
        client.cache_clear()


@pytest.fixture
def point_trigger_at(monkeypatch: pytest.MonkeyPatch, moto: MotoEndpoint, account: str, topic_arn: str,
                     tmp_path: Path) -> Iterator[Callable[[str], dict[str, str]]]:
    """Call with a SageMaker endpoint URL: the in-process trigger then talks to it, and to moto for S3 and SNS."""

    def point(sagemaker_url: str) -> dict[str, str]:
        environment = trigger_environment(account=account, topic_arn=topic_arn, s3_url=moto.url,
                                          sagemaker_url=sagemaker_url, settings_dir=tmp_path)
        for name, value in environment.items():
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("AWS_PROFILE", raising=False)
        _fresh_trigger_state()
        return environment

    yield point
    monkeypatch.undo()
    _fresh_trigger_state()


@pytest.fixture
def marker_event(moto: MotoEndpoint, account: str) -> dict[str, Any]:
    """The EventBridge `Object Created` event for the stored marker (its real ETag, size and sequencer)."""
    return object_created_event(local_client("s3", moto.url), bucket=DATA_BUCKET, key=MARKER_KEY, account=account)
