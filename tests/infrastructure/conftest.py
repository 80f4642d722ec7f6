"""Synthesis takes seconds: each named environment is synthesized once per test session and shared."""

from __future__ import annotations

import pytest

from .synthesis import SynthesizedApp, config_for, synthesize


@pytest.fixture(scope="session")
def dev_app(tmp_path_factory: pytest.TempPathFactory) -> SynthesizedApp:
    return synthesize(config_for("dev"), tmp_path_factory.mktemp("synth-dev"))


@pytest.fixture(scope="session")
def prod_app(tmp_path_factory: pytest.TempPathFactory) -> SynthesizedApp:
    return synthesize(config_for("prod"), tmp_path_factory.mktemp("synth-prod"))


@pytest.fixture(scope="session", params=["dev", "prod"])
def any_app(request: pytest.FixtureRequest) -> SynthesizedApp:
    return request.getfixturevalue(f"{request.param}_app")
