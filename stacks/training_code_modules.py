"""The training code's standard-library-only modules, loaded by file path.

`training_code/` is the SageMaker source_dir, not a package of this app, and most of its modules need torch; these
few hold plain data that synthesis must agree with (the metrics SageMaker scrapes, the supported containers).
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

RANKER_DIR = Path(__file__).resolve().parents[1] / "training_code" / "ranker"


@functools.cache
def ranker_module(name: str) -> ModuleType:
    """`training_code/ranker/<name>.py` as a module (`log_format`, `container_profiles`)."""
    path = RANKER_DIR / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"ranker_{name}", path)
    if spec is None or spec.loader is None or not path.is_file():
        raise FileNotFoundError(f"{path} is missing: synthesis reads it from the training code")
    module = importlib.util.module_from_spec(spec)
    # Registered before running: dataclasses look their module up in sys.modules.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
