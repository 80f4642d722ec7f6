"""Benchmarks: each prints a table and records it in docs/benchmarks.md.

training_code/ is a SageMaker source dir (`ranker`, `sagemaker_distributed` at its root), not an installed package:
importing any benchmark puts it on the path first, as the SageMaker container does, so `python -m benchmarks.NAME`
runs from the repository root as it is.
"""

import sys
from pathlib import Path

TRAINING_CODE = Path(__file__).resolve().parents[1] / "training_code"
if str(TRAINING_CODE) not in sys.path:
    sys.path.insert(0, str(TRAINING_CODE))
