"""Fixtures for the training tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def synthetic_channel(tmp_path_factory) -> Path:
    """64 queries x 8 documents x 12 features, LETOR text with a group file."""
    from ranker.data.synthetic import generate, write_letor

    folder = tmp_path_factory.mktemp("synthetic")
    write_letor(generate(num_queries=64, docs_per_query=8, num_features=12, seed=3), folder)
    return folder
