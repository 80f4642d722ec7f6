"""What every unit suite shares: no real AWS credentials; the SageMaker SDK's config checked once."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def offline_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake credentials, so a call that escaped its Stubber fails to sign for nothing real."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_PROFILE", raising=False)


@pytest.fixture(scope="module")
def sdk_config_checked_once() -> Iterator[None]:
    """For the tests that run the real SageMaker Python SDK: its config schema checked once, not on every lookup
    (sagemaker_sdk.config_validated_once_per_schema)."""
    from sagemaker_sdk import config_validated_once_per_schema

    with config_validated_once_per_schema():
        yield
