"""Where the `model_trainer` launch's files lie in the artifacts bucket: synthesis deploys them there
(stacks/model_trainer_files.py) and the trigger points the job's channels at them (model_trainer_request.py).

Standard library only and importing nothing of the trigger, so synthesis loads this file alone (stacks/trigger_modules.py).
"""

from __future__ import annotations

# Every deployment's files go below KEY_PREFIX + a hash of their content.
KEY_PREFIX = "model-trainer/"
# The channels ModelTrainer adds after the data, as it names them (sagemaker-train's constants.py: SM_CODE,
# SM_DRIVERS); the folders below a deployment's prefix carry the same names.
CODE_CHANNEL, DRIVERS_CHANNEL = "code", "sm_drivers"


def code_folder() -> str:
    """The source folder's files, loose: the `code` channel of every job."""
    return f"{CODE_CHANNEL}/"


def drivers_folder(driver: str, entry_point: str) -> str:
    """The `sm_drivers` channel of `entry_point` (a script at the top of the source folder) under `driver`
    (container_profiles.MODEL_TRAINER_DRIVERS)."""
    return f"{DRIVERS_CHANNEL}/{driver}/{entry_point}/"
