"""Settings every test suite shares."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[1]

# Triton kernels (ranker.gpu's) run in Triton's interpreter on the CPU: CI has no GPU. Triton reads the switch when it
# is first imported, so it is set here, before any test module can import it.
os.environ["TRITON_INTERPRET"] = "1"

# The real LETOR sample lives outside the repository (it is not ours to copy in); CI has it beside the clone.
LETOR_SAMPLE_DIR = Path(os.environ.get("LETOR_SAMPLE_DIR", PROJECT_ROOT.parent / "shared" / "data" / "letor-sample"))


@pytest.fixture(scope="session")
def letor_sample_dir() -> Path:
    """Folder holding `rank.train` and `rank.train.query`; skips when the sample is not on this machine."""
    if not (LETOR_SAMPLE_DIR / "rank.train").is_file():
        pytest.skip(f"LETOR sample not found at {LETOR_SAMPLE_DIR}: set LETOR_SAMPLE_DIR to the letor-sample folder")
    return LETOR_SAMPLE_DIR
