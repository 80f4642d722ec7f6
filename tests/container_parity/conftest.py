"""Environments like the AWS PyTorch training containers, one per tested profile, built once and cached."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from sagemaker_distributed.container_profiles import ContainerProfile

from local_mode.container.container_envs import ContainerEnv
from local_mode.aws.synthesized_app import PROJECT_ROOT

from .profile_envs import PARITY_PROFILES, build_or_skip

SUITE_DIR = Path(__file__).parent
_background_build: subprocess.Popen[bytes] | None = None


@pytest.fixture(scope="session", params=PARITY_PROFILES, ids=lambda profile: profile.name)
def profile_env(request: pytest.FixtureRequest) -> tuple[ContainerProfile, ContainerEnv]:
    return request.param, build_or_skip(request.param)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Where this suite runs, one test process starts building its environments (and their tracking layers) at once,
    in the background: a first build takes a minute or two, and tests/conftest.py hands this suite's files out after
    the other slow files, so they find the environments ready instead of a test worker waiting on each build. The
    builds take each environment's lock, so a test that gets there first waits for that build; if one fails, the
    test's own attempt fails in its place with the reason (the builder's output is dropped)."""
    global _background_build
    first_worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0") == "gw0"
    if first_worker and any(item.path.is_relative_to(SUITE_DIR) for item in session.items):
        _background_build = subprocess.Popen(
            [sys.executable, "-m", "local_mode.container.container_envs", "--tracking",
             *(profile.framework_version for profile in PARITY_PROFILES)],
            cwd=PROJECT_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """A session cut short stops a build still running, with its installers (their process group): an installer left
    behind would go on writing into an environment the next session rebuilds."""
    if _background_build is not None and _background_build.poll() is None:
        os.killpg(_background_build.pid, signal.SIGTERM)
        _background_build.wait()
