"""Makes the project's training package importable from the benchmarks, as the SageMaker container imports it.

training_code/ is a SageMaker source dir (`ranker`, `train_lightning` at its root), not an installed package:
import this module before any of those.
"""

from __future__ import annotations

import sys
from pathlib import Path

TRAINING_CODE = Path(__file__).resolve().parents[1] / "training_code"
if str(TRAINING_CODE) not in sys.path:
    sys.path.insert(0, str(TRAINING_CODE))

# Benchmark queries hold 32 documents, so a batch of 8192 samples per GPU is 256 whole queries.
DOCS_PER_QUERY = 32
