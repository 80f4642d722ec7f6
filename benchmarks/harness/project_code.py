"""What the benchmarks share about the project: where its code lives (the package puts it on the path), where the
real LETOR sample lies, the shape of their queries, and the training code of another git revision."""

import io
import os
import subprocess
import tarfile
from pathlib import Path

from benchmarks import PROJECT_ROOT, TRAINING_CODE

__all__ = ["DOCS_PER_QUERY", "LETOR_SAMPLE", "PROJECT_ROOT", "TRAINING_CODE", "revision_tree"]

# Where the tests find the sample too (tests/conftest.py): beside the clone, or LETOR_SAMPLE_DIR.
LETOR_SAMPLE = Path(os.environ.get("LETOR_SAMPLE_DIR", PROJECT_ROOT.parent / "shared" / "data" / "letor-sample"))

# Benchmark queries hold 32 documents, so a batch of 8192 samples per GPU is 256 whole queries.
DOCS_PER_QUERY = 32


def revision_tree(ref: str, into: Path) -> Path:
    """training_code/ as git revision `ref` holds it, unpacked under `into`."""
    archive = subprocess.run(["git", "archive", ref, "training_code"], cwd=TRAINING_CODE.parent, capture_output=True,
                             check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into / "training_code"
