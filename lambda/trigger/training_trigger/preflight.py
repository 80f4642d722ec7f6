"""Checks a CreateTrainingJob request before any money is spent.

Three layers: botocore's own service model (required fields, types, minimum lengths, as the API would), the limits
the same model documents but botocore leaves to the service (lengths, patterns, enums, maxima: `limits.py`), then
the rules the API checks only after a job is queued, or never, each message naming the field and the fix.
"""

from __future__ import annotations

from typing import Any

from botocore.validate import ParamValidator

from training_trigger import container_profiles
from training_trigger.aws_clients import sagemaker_client
from training_trigger.datasets import DatasetCatalog
from training_trigger.instances import accelerators
from training_trigger.job_names import job_name_errors
from training_trigger.job_environment import environment_errors
from training_trigger.limits import (
    MAX_HYPERPARAMETER_VALUE_LENGTH,
    MAX_HYPERPARAMETERS,
    member,
    service_limit_errors,
    tag_errors,
    training_environment_limits,
)
from training_trigger.model_trainer_request import launch_request_errors
from training_trigger.planning import TrainingJobSpec
from training_trigger.settings import Settings
from training_trigger.tuning_guards import tuning_errors
from training_trigger.warm_start import parent_dataset_errors

# Request members whose limits _naming_errors checks with the user's field names.
_NAMED_MEMBERS = ("HyperParameters", "Tags", "Environment")
MAX_KEEP_ALIVE_SECONDS = 3600
MAX_RETRY_ATTEMPTS = 30


def preflight_errors(request: dict[str, Any], spec: TrainingJobSpec, settings: Settings) -> list[str]:
    return (service_model_errors(request) + service_limit_errors(request, skip=_NAMED_MEMBERS)
            + _naming_errors(request, settings) + _distribution_errors(spec, settings) + _resource_errors(spec, settings)
            + launch_request_errors(spec, settings)
            + environment_errors(request.get("Environment", {}), "environment", distribution=spec.distribution,
                                 limits=training_environment_limits()))


def tuning_preflight_errors(tuning_request: dict[str, Any], training_request: dict[str, Any],
                            spec: TrainingJobSpec, settings: Settings) -> list[str]:
    """A tuning job's trials are the training job `training_request` describes, so everything checked for a training
    job is checked for them; then the tuning request against its own API model and the tuning rules."""
    operation = "CreateHyperParameterTuningJob"
    return (preflight_errors(training_request, spec, settings) + service_model_errors(tuning_request, operation)
            + service_limit_errors(tuning_request, skip=("Tags",), operation=operation)
            + tuning_errors(spec.tuning, spec, settings) + _warm_start_parent_errors(spec, settings))


def _warm_start_parent_errors(spec: TrainingJobSpec, settings: Settings) -> list[str]:
    """The one read before a tuning job starts: each warm-start parent's own description (dry runs included)."""
    catalog = DatasetCatalog(settings.data_bucket, settings.dataset_prefix, settings.marker_names)
    return parent_dataset_errors(
        spec, settings.job_name_prefix, catalog,
        lambda name: sagemaker_client().describe_hyper_parameter_tuning_job(HyperParameterTuningJobName=name))


def service_model_errors(request: dict[str, Any], operation: str = "CreateTrainingJob") -> list[str]:
    input_shape = sagemaker_client().meta.service_model.operation_model(operation).input_shape
    report = ParamValidator().validate(request, input_shape)
    if not report.has_errors():
        return []
    return [f"{operation} request breaks the SageMaker API model: {line.strip()}"
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
    return errors + tag_errors({tag["Key"]: tag["Value"] for tag in request["Tags"]}, "tags")


def _distribution_errors(spec: TrainingJobSpec, settings: Settings) -> list[str]:
    """The container-profile rules synthesis also applies, then what only a planned job shows."""
    mode, instance_type = spec.distribution, spec.instance_type
    errors = container_profiles.framework_errors(settings.framework_version, settings.python_version)
    errors += container_profiles.distribution_errors(distribution=mode, instance_type=instance_type,
                                                     framework_version=settings.framework_version,
                                                     image_source=settings.image_source)
    if mode == "torch_distributed" and not spec.entry_point.endswith(".py"):
        errors.append(f"distribution='torch_distributed' runs Python scripts only, not "
                      f"entry_point={spec.entry_point!r}: use a .py script, or distribution 'none'")
    devices = accelerators(instance_type)
    if mode != "none" and spec.instance_count == 1 and devices is not None and devices < 2:
        errors.append(f"distribution={mode!r} starts one process per accelerator, but instance_type="
                      f"{instance_type!r} x instance_count=1 has {devices}: use a multi-GPU instance, raise "
                      f"instance_count, or use distribution 'none'")
    return errors


def _resource_errors(spec: TrainingJobSpec, settings: Settings) -> list[str]:
    errors = []
    if spec.spot and settings.max_wait_seconds < spec.max_runtime:
        errors.append(f"spot: max_wait_seconds={settings.max_wait_seconds} is below max_runtime={spec.max_runtime}; "
                      f"SageMaker requires wait >= runtime: lower max_runtime or raise max_wait_seconds")
    if spec.spot and settings.keep_alive_seconds:
        errors.append(f"spot with keep_alive_seconds={settings.keep_alive_seconds}: warm pools do not support "
                      f"managed spot training; set spot=false or keep_alive_seconds=0")
    if settings.keep_alive_seconds > MAX_KEEP_ALIVE_SECONDS:
        errors.append(f"keep_alive_seconds={settings.keep_alive_seconds} exceeds {MAX_KEEP_ALIVE_SECONDS}: lower it")
    if settings.job_retry_attempts > MAX_RETRY_ATTEMPTS:
        errors.append(f"job_retry_attempts={settings.job_retry_attempts} exceeds {MAX_RETRY_ATTEMPTS}: lower it")
    return errors
