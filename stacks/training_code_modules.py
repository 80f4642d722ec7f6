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

TRAINING_CODE_DIR = Path(__file__).resolve().parents[1] / "training_code"


def module_from_file(path: Path, name: str) -> ModuleType:
    """The module in `path`, registered as `name`; FileNotFoundError saying synthesis reads it when it is missing."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None or not path.is_file():
        raise FileNotFoundError(f"{path} is missing: synthesis reads it")
    module = importlib.util.module_from_spec(spec)
    # Registered before running: dataclasses look their module up in sys.modules.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@functools.cache
def training_code_module(relative_path: str) -> ModuleType:
    """`training_code/<relative_path>` as a module, e.g. `ranker/log_format.py`,
    `sagemaker_distributed/container_profiles.py`."""
    # Their own imports stay within these stdlib-only modules (ranker/config.py reads sagemaker_distributed.paths).
    if str(TRAINING_CODE_DIR) not in sys.path:
        sys.path.append(str(TRAINING_CODE_DIR))
    return module_from_file(TRAINING_CODE_DIR / relative_path,
                            "training_code_" + relative_path.removesuffix(".py").replace("/", "_"))
