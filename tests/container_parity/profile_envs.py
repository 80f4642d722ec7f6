"""The container environments the parity suite tests: the oldest and the newest supported profile.

Where pyenv lacks a profile's Python the suite skips, naming what to install; under CI (`CI=true`, which .ci/run
sets) it fails instead, so the suite cannot silently drop out of CI.
"""

from __future__ import annotations

import os

import pytest
from sagemaker_distributed import container_profiles

from local_mode.container.container_envs import ContainerEnv, MissingInterpreter, container_env

PARITY_PROFILES = (container_profiles.PROFILES[0], container_profiles.PROFILES[-1])


def build_or_skip(profile: container_profiles.ContainerProfile) -> ContainerEnv:
    """The profile's cached environment (built on first use, ~2 minutes)."""
    try:
        return container_env(profile)
    except MissingInterpreter as missing:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{missing}; CI must run the container-parity suite")
        pytest.skip(str(missing))
