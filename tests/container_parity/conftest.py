"""Environments like the AWS PyTorch training containers, one per tested profile, built once and cached."""

from __future__ import annotations

import pytest
from sagemaker_distributed.container_profiles import ContainerProfile

from local_mode.container_envs import ContainerEnv

from .profile_envs import PARITY_PROFILES, build_or_skip


@pytest.fixture(scope="session", params=PARITY_PROFILES, ids=lambda profile: profile.name)
def profile_env(request: pytest.FixtureRequest) -> tuple[ContainerProfile, ContainerEnv]:
    return request.param, build_or_skip(request.param)
