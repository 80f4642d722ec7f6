"""The trigger's standard-library-only modules whose rules synthesis applies too, loaded by file path.

`lambda/trigger/` is the Lambda's asset folder, not a package of this app: its modules import as the Lambda runtime
imports them. The few that import nothing of it (job_names.py: how jobs are named) are loaded alone, so a rule the
trigger would apply to every job is checked once at synthesis from the same code.
"""

from __future__ import annotations

import functools
from pathlib import Path
from types import ModuleType

from stacks.training_code_modules import module_from_file

TRIGGER_PACKAGE_DIR = Path(__file__).resolve().parents[1] / "lambda" / "trigger" / "training_trigger"


@functools.cache
def trigger_module(relative_path: str) -> ModuleType:
    """`lambda/trigger/training_trigger/<relative_path>` as a module, e.g. `job_names.py`."""
    return module_from_file(TRIGGER_PACKAGE_DIR / relative_path,
                            "training_trigger_" + relative_path.removesuffix(".py").replace("/", "_"))
