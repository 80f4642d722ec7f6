"""What the benchmarks share about the project: where its code lives (the package puts it on the path), where the
real LETOR sample lies, and the shape of their queries."""

import os
from pathlib import Path

from benchmarks import PROJECT_ROOT, TRAINING_CODE

__all__ = ["DOCS_PER_QUERY", "LETOR_SAMPLE", "PROJECT_ROOT", "TRAINING_CODE"]

# Where the tests find the sample too (tests/conftest.py): beside the clone, or LETOR_SAMPLE_DIR.
LETOR_SAMPLE = Path(os.environ.get("LETOR_SAMPLE_DIR", PROJECT_ROOT.parent / "shared" / "data" / "letor-sample"))

# Benchmark queries hold 32 documents, so a batch of 8192 samples per GPU is 256 whole queries.
DOCS_PER_QUERY = 32
