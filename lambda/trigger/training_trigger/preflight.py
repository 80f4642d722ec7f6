"""Checks a CreateTrainingJob request before any money is spent.

Three layers: botocore's own service model (required fields, types, minimum lengths, as the API would), the limits
the same model documents but botocore leaves to the service (lengths, patterns, enums, maxima: `limits.py`), then
the rules the API checks only after a job is queued, or never, each message naming the field and the fix.
"""

from __future__ import annotations

from typing import Any

from botocore.validate import ParamValidator

from training_trigger.aws_clients import sagemaker_client
from training_trigger.instances import SMDDP_INSTANCE_TYPES, accelerators, is_gpu, is_p5, is_trainium
from training_trigger.job_names import job_name_errors
from training_trigger.limits import (
    MAX_HYPERPARAMETER_VALUE_LENGTH,
    MAX_HYPERPARAMETERS,
    member,
    service_limit_errors,
    tag_errors,
)
from training_trigger.planning import TrainingJobSpec
from training_trigger.settings import Settings

# Request members whose limits _naming_errors checks with the user's field names.
_NAMED_MEMBERS = ("HyperParameters", "Tags")
MAX_KEEP_ALIVE_SECONDS = 3600
MAX_RETRY_ATTEMPTS = 30
# The newest PyTorch whose AWS deep learning container still ships the SMDDP library.
LAST_SMDDP_FRAMEWORK = (2, 2, 0)
REQUIRED_CHANNEL = "train"


def preflight_errors(request: dict[str, Any], spec: TrainingJobSpec, settings: Settings) -> list[str]:
    return (service_model_errors(request) + service_limit_errors(request, skip=_NAMED_MEMBERS)
            + _naming_errors(request, settings) + _distribution_errors(spec, settings) + _resource_errors(spec, settings))


def service_model_errors(request: dict[str, Any]) -> list[str]:
    input_shape = sagemaker_client().meta.service_model.operation_model("CreateTrainingJob").input_shape
    report = ParamValidator().validate(request, input_shape)
    if not report.has_errors():
        return []
    return [f"CreateTrainingJob request breaks the SageMaker API model: {line.strip()}"
            for line in report.generate_report().splitlines() if line.strip()]


def _naming_errors(request: dict[str, Any], settings: Settings) -> list[str]:
    errors = job_name_errors(request["TrainingJobName"], settings.job_name_prefix)
    hyperparameters = request["HyperParameters"]
    if len(hyperparameters) > MAX_HYPERPARAMETERS:
        errors.append(f"hyperparameters: {len(hyperparameters)} entries (with the trigger's own) exceed "
                      f"SageMaker's {MAX_HYPERPARAMETERS}: drop some")
    for key, value in hyperparameters.items():
        if len(value) > MAX_HYPERPARAMETER_VALUE_LENGTH:
            errors.append(f"{member('hyperparameters', key)}: the encoded value is {len(value)} characters, over "
                          f"{MAX_HYPERPARAMETER_VALUE_LENGTH}: pass large settings as a file in a channel")
    # With the trigger's own tags, whose values come from dataset folder names.
    errors += tag_errors({tag["Key"]: tag["Value"] for tag in request["Tags"]}, "tags")
    channels = [channel["ChannelName"] for channel in request["InputDataConfig"]]
    if REQUIRED_CHANNEL not in channels:
        errors.append(f"channels: {channels} has no {REQUIRED_CHANNEL!r} channel, which the training scripts "
                      f"require: write the dataset under <version>/{REQUIRED_CHANNEL}/ or give channels.train")
    return errors


def _framework_version(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".") if part.isdigit())


def _distribution_errors(spec: TrainingJobSpec, settings: Settings) -> list[str]:
    errors = []
    mode, instance_type = spec.distribution, spec.instance_type
    if mode in ("pytorchddp", "smdistributed"):
        if is_p5(instance_type):
            errors.append(f"distribution={mode!r} on instance_type={instance_type!r}: SMDDP does not run on p5 "
                          f"unless torchrun launches it; use distribution 'torch_distributed'")
        elif instance_type not in SMDDP_INSTANCE_TYPES:
            errors.append(f"distribution={mode!r} needs an SMDDP instance {list(SMDDP_INSTANCE_TYPES)}, not "
                          f"instance_type={instance_type!r}: pick one, or use distribution 'torch_distributed'")
        if settings.image_source == "dlc" and _framework_version(settings.framework_version) > LAST_SMDDP_FRAMEWORK:
            errors.append(f"distribution={mode!r} with the AWS PyTorch {settings.framework_version} container: SMDDP "
                          f"ships only up to PyTorch 2.2.0; use distribution 'torch_distributed', framework 2.2.0, "
                          f"or the custom image")
        if "py3" not in settings.python_version:
            errors.append(f"distribution={mode!r} with PYTHON_VERSION={settings.python_version!r}: use py3x")
    if mode == "torch_distributed":
        if not (is_gpu(instance_type) or is_trainium(instance_type)):
            errors.append(f"distribution='torch_distributed' needs a GPU or Trainium instance, not "
                          f"instance_type={instance_type!r}: pick e.g. ml.g5.12xlarge, or use distribution 'none'")
        if not spec.entry_point.endswith(".py"):
            errors.append(f"distribution='torch_distributed' runs Python scripts only, not "
                          f"entry_point={spec.entry_point!r}: use train_ddp.py or train_lightning.py")
    if is_trainium(instance_type) and mode not in ("torch_distributed", "none"):
        errors.append(f"distribution={mode!r} does not run on Trainium instance_type={instance_type!r}: use "
                      f"'torch_distributed'")
    devices = accelerators(instance_type)
    if mode != "none" and spec.instance_count == 1 and devices is not None and devices < 2:
        errors.append(f"distribution={mode!r} starts one process per accelerator, but instance_type="
                      f"{instance_type!r} x instance_count=1 has {devices}: use a multi-GPU instance, raise "
                      f"instance_count, or use distribution 'none'")
    return errors


def _resource_errors(spec: TrainingJobSpec, settings: Settings) -> list[str]:
    errors = []
    if spec.spot and settings.max_wait_seconds < spec.max_runtime:
        errors.append(f"spot: MAX_WAIT_SECONDS={settings.max_wait_seconds} is below max_runtime={spec.max_runtime}; "
                      f"SageMaker requires wait >= runtime: lower max_runtime or raise MAX_WAIT_SECONDS")
    if spec.spot and settings.keep_alive_seconds:
        errors.append(f"spot with KEEP_ALIVE_SECONDS={settings.keep_alive_seconds}: warm pools do not support "
                      f"managed spot training; set spot=false or KEEP_ALIVE_SECONDS=0")
    if settings.keep_alive_seconds > MAX_KEEP_ALIVE_SECONDS:
        errors.append(f"KEEP_ALIVE_SECONDS={settings.keep_alive_seconds} exceeds {MAX_KEEP_ALIVE_SECONDS}: lower it")
    if settings.job_retry_attempts > MAX_RETRY_ATTEMPTS:
        errors.append(f"JOB_RETRY_ATTEMPTS={settings.job_retry_attempts} exceeds {MAX_RETRY_ATTEMPTS}: lower it")
    return errors
