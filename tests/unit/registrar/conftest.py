"""The registrar's unit tests: Powertools' names set before its modules load, and no real credentials."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "model-registration")
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "RankerTraining")
os.environ.setdefault("AWS_DEFAULT_REGION", "eu-west-1")


@pytest.fixture(autouse=True)
def offline_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake credentials, so a call that escaped its Stubber fails to sign for nothing real."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
