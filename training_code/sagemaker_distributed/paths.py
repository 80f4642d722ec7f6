"""Where a training script reads and writes, inside a SageMaker job and outside one, and what SageMaker put there.

Inside a job the training toolkit (or, under the `model_trainer` launch, SDK v3 ModelTrainer's drivers) sets `SM_*`
variables for every folder SageMaker uploads or syncs; outside one
(a laptop, CI, a plain `torchrun`) every default is a folder of this run's own, so two runs never share state by
accident. Standard library only: configuration code may read it without torch.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

SAGEMAKER_BASE_DIR = Path("/opt/ml")
# A channel's S3DataDistributionType, as SageMaker writes it into inputdataconfig.json (`S3DistributionType`).
FULLY_REPLICATED = "FullyReplicated"
SHARDED_BY_S3_KEY = "ShardedByS3Key"


def in_training_job(env: Mapping[str, str] = os.environ) -> bool:
    """Whether SageMaker started this process: its training toolkit, or SDK v3 ModelTrainer's drivers (launch
    `model_trainer`); both set SM_TRAINING_ENV and SM_MODEL_DIR."""
    return "SM_TRAINING_ENV" in env or "SM_MODEL_DIR" in env


def base_dir(env: Mapping[str, str] = os.environ) -> Path:
    """/opt/ml, or where local mode relocates it (`SAGEMAKER_BASE_DIR`)."""
    return Path(env.get("SAGEMAKER_BASE_DIR", SAGEMAKER_BASE_DIR))


def model_dir(env: Mapping[str, str] = os.environ) -> Path:
    """What SageMaker packs into model.tar.gz: `$SM_MODEL_DIR`, else `model`."""
    return Path(env.get("SM_MODEL_DIR") or "model")


def output_data_dir(env: Mapping[str, str] = os.environ) -> Path:
    """What SageMaker packs into output.tar.gz: `$SM_OUTPUT_DATA_DIR`, else `output`."""
    return Path(env.get("SM_OUTPUT_DATA_DIR") or "output")


def checkpoint_dir(env: Mapping[str, str] = os.environ, run_dir: Path | None = None) -> Path:
    """In a job, `/opt/ml/checkpoints` (under SAGEMAKER_BASE_DIR), the folder SageMaker syncs with S3 and restores on
    a restart; outside one, `checkpoints` under the run's own folder (`run_dir`, by default the output data folder),
    never a folder every run on the machine would share."""
    if in_training_job(env):
        return base_dir(env) / "checkpoints"
    return Path(run_dir if run_dir is not None else output_data_dir(env)) / "checkpoints"


def tensorboard_dir(env: Mapping[str, str] = os.environ) -> Path:
    """`$SM_OUTPUT_DIR/tensorboard` (the LocalPath a TensorBoardOutputConfig uploads from), else
    `output/tensorboard`."""
    return Path(env["SM_OUTPUT_DIR"]) / "tensorboard" if env.get("SM_OUTPUT_DIR") else Path("output/tensorboard")


def failure_file(env: Mapping[str, str] = os.environ) -> Path | None:
    """`$SM_OUTPUT_DIR/failure` as the toolkit sets it, else `$SAGEMAKER_BASE_DIR/output/failure` (local mode
    relocates /opt/ml this way); None outside SageMaker, where stderr is the only report."""
    if env.get("SM_OUTPUT_DIR"):
        return Path(env["SM_OUTPUT_DIR"]) / "failure"
    if env.get("SAGEMAKER_BASE_DIR"):
        return Path(env["SAGEMAKER_BASE_DIR"]) / "output" / "failure"
    return None


def channel(name: str, env: Mapping[str, str] = os.environ) -> Path | None:
    """The local folder of input channel `name` (`$SM_CHANNEL_<NAME>`), None where the job has no such channel."""
    value = env.get(f"SM_CHANNEL_{name.upper()}")
    return Path(value) if value else None


def hyperparameters(env: Mapping[str, str] = os.environ) -> dict[str, object]:
    """The job's hyperparameters as SageMaker passed them (`SM_HPS`, JSON); the script also gets them as flags."""
    return json.loads(env.get("SM_HPS") or "{}")


def input_data_config(env: Mapping[str, str] = os.environ) -> dict[str, dict[str, object]]:
    """Each channel's settings as SageMaker wrote them before the job started (`TrainingInputMode`,
    `S3DistributionType`, ...): `$SM_INPUT_DATA_CONFIG`, which the toolkit copies from
    `/opt/ml/input/config/inputdataconfig.json`, else that file itself; {} outside a job."""
    if env.get("SM_INPUT_DATA_CONFIG"):
        return json.loads(env["SM_INPUT_DATA_CONFIG"])
    written = base_dir(env) / "input" / "config" / "inputdataconfig.json"
    return json.loads(written.read_text()) if written.is_file() else {}


def channel_distribution(name: str, env: Mapping[str, str] = os.environ) -> str:
    """How SageMaker spread channel `name`'s objects over the job's hosts: `ShardedByS3Key` (this host holds its own
    share, about 1/N of the objects, and no other host holds those) or `FullyReplicated` (every host holds all of
    them; also outside a job, and for a channel the job does not have)."""
    return str(input_data_config(env).get(name, {}).get("S3DistributionType", FULLY_REPLICATED))


def channel_is_sharded(name: str, env: Mapping[str, str] = os.environ) -> bool:
    """Whether this host holds only its own share of channel `name` (`ShardedByS3Key`)."""
    return channel_distribution(name, env) == SHARDED_BY_S3_KEY
