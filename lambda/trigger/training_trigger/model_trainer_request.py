"""The CreateTrainingJob request of the `model_trainer` launch: what SageMaker Python SDK v3's
`ModelTrainer(source_code=SourceCode(...), compute=Compute(...), distributed=Torchrun() or None, ...).train()` sends.

Pure, like request.py, whose job definition (role, resources, stopping condition, checkpoints, VPC, flags, retries,
environment) both launches share. What ModelTrainer sends otherwise: its drivers' entrypoint and arguments in
`AlgorithmSpecification` (the image's training toolkit never runs), the user's hyperparameters only (strings as given,
other values JSON-encoded, as its `safe_serialize`), two channels after the data (`code`, the source folder as loose
files, and `sm_drivers`, its drivers with `sourcecode.json` and `distributed.json`, both under the prefix synthesis
deployed them to: stacks/model_trainer_files.py) and `OutputDataConfig.CompressionType` GZIP. The stack's
`MetricDefinitions` stay, as `ModelTrainer.with_metric_definitions(...)` sends them: the CloudWatch metrics and the
model registrar read them. `InfraCheckConfig` is sent as `ModelTrainer.with_infra_check_config()` sends it, and a
tracked job's `MlflowConfig`, which ModelTrainer has no argument for, as the toolkit launch sends it (both in
request.training_job_only_fields). tests/unit/trigger/test_model_trainer_conformance.py compares the request field by
field with the one the real ModelTrainer sends.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from training_trigger.container_profiles import MODEL_TRAINER_DRIVERS, MODEL_TRAINER_LAUNCH, launch_errors
from training_trigger.model_trainer_layout import CODE_CHANNEL, DRIVERS_CHANNEL, code_folder, drivers_folder
from training_trigger.planning import FULLY_REPLICATED, TrainingJobSpec
from training_trigger.request import (
    build_training_job_request,
    data_channels,
    s3_channel,
    training_job_definition,
    training_job_only_fields,
)
from training_trigger.settings import Settings

# ModelTrainer names the channels it adds with InputMode File, whatever the job's TrainingInputMode.
SDK_CHANNEL_INPUT_MODE = "File"
COMPRESSION_TYPE = "GZIP"


def model_trainer_hyperparameters(hyperparameters: Mapping[str, Any]) -> dict[str, str]:
    """ModelTrainer's encoding: a string as given, any other value JSON-encoded (3 -> "3", True -> "true")."""
    return {str(key): value if isinstance(value, str) else json.dumps(value) for key, value in hyperparameters.items()}


def _sdk_channel(name: str, uri: str) -> dict[str, Any]:
    return {**s3_channel(name, uri, FULLY_REPLICATED), "InputMode": SDK_CHANNEL_INPUT_MODE}


def launch_channels(spec: TrainingJobSpec, settings: Settings) -> list[dict[str, Any]]:
    """The `code` and `sm_drivers` channels of the job's script and driver."""
    files = f"s3://{settings.artifacts_bucket}/{settings.model_trainer['prefix']}"
    channels = [_sdk_channel(CODE_CHANNEL, files + code_folder())]
    driver = MODEL_TRAINER_DRIVERS.get(spec.distribution)
    if driver is not None:  # a distribution without one is refused before any call (launch_request_errors)
        channels.append(_sdk_channel(DRIVERS_CHANNEL, files + drivers_folder(driver, spec.entry_point)))
    return channels


def build_model_trainer_request(spec: TrainingJobSpec, settings: Settings) -> dict[str, Any]:
    """The keyword arguments of `sagemaker.create_training_job(**request)` for the `model_trainer` launch."""
    definition = training_job_definition(spec, settings)
    return {
        "TrainingJobName": spec.job_name,
        "HyperParameters": model_trainer_hyperparameters(spec.hyperparameters),
        **definition,
        "AlgorithmSpecification": {
            **definition["AlgorithmSpecification"],
            "ContainerEntrypoint": list(settings.model_trainer["container_entrypoint"]),
            "ContainerArguments": list(settings.model_trainer["container_arguments"]),
        },
        "InputDataConfig": data_channels(spec) + launch_channels(spec, settings),
        "OutputDataConfig": {**definition["OutputDataConfig"], "CompressionType": COMPRESSION_TYPE},
        **training_job_only_fields(spec, settings),
    }


def launch_request_errors(spec: TrainingJobSpec, settings: Settings) -> list[str]:
    """Why the job's launch cannot start it (the rule synthesis applies to the stack's defaults), and what only a
    planned job shows: a tuning job, or a data channel named like one ModelTrainer adds."""
    errors = launch_errors(launch=spec.launch, distribution=spec.distribution, entry_point=spec.entry_point,
                           files=settings.bundle_files)
    if spec.launch != MODEL_TRAINER_LAUNCH:
        return errors
    if spec.tuning is not None:
        errors.append(f"launch={spec.launch!r} with a tuning section: a tuning job's trials run the toolkit launch, "
                      f"as SDK v3's HyperparameterTuner starts them (sagemaker_program); drop launch, or the tuning "
                      f"section")
    errors += [f"channels: {name!r} is a channel launch={spec.launch!r} adds itself: rename that folder or channel"
               for name in spec.channels if name in (CODE_CHANNEL, DRIVERS_CHANNEL)]
    return errors


def training_job_request(spec: TrainingJobSpec, settings: Settings) -> dict[str, Any]:
    """The request of the job's launch."""
    if spec.launch == MODEL_TRAINER_LAUNCH:
        return build_model_trainer_request(spec, settings)
    return build_training_job_request(spec, settings)
