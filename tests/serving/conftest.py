"""One real short training job for the scoring, serving and export tests."""

from __future__ import annotations

import sys

import pytest

from .short_job import TrainedJob, train_short_job


@pytest.fixture(scope="session")
def trained_job(tmp_path_factory) -> TrainedJob:
    return train_short_job(tmp_path_factory.mktemp("short-job"), sys.executable)
