"""Benchmarks: each prints a table and records it in docs/benchmarks.md.

One sub-package per concern: `gpu` (the training step on GPUs), `ranking` (ranking quality and time to model against
LightGBM), `cpu` (a job's CPU side: data path, imports, exit) and `deployment` (the trigger, the container profiles'
environments, the serving exports) import nothing of one another; they build on `baselines` (the naive peers) and
`harness` (what every benchmark shares), `baselines` on `harness` alone. Each sub-package's docstring names what it may
import.

training_code/ is a SageMaker source dir (`ranker`, `sagemaker_distributed` at its root), not an installed package:
importing any benchmark puts it on the path first, as the SageMaker container does, so `python -m
benchmarks.ROOM.NAME` runs from the repository root as it is.
"""

import sys
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
TRAINING_CODE = PROJECT_ROOT / "training_code"
if str(TRAINING_CODE) not in sys.path:
    sys.path.insert(0, str(TRAINING_CODE))
