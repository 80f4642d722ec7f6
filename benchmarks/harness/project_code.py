"""What the benchmarks share about the project's code: where it lives (the package puts it on the path) and the
shape of their queries."""

from benchmarks import TRAINING_CODE

__all__ = ["DOCS_PER_QUERY", "TRAINING_CODE"]

# Benchmark queries hold 32 documents, so a batch of 8192 samples per GPU is 256 whole queries.
DOCS_PER_QUERY = 32
