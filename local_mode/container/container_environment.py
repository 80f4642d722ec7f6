"""The environment the sagemaker-training toolkit gives a training script: SM_* variables and user arguments.

Values follow the toolkit's own encoding (`sagemaker_training.mapping`): strings as they are, everything
else as compact JSON with sorted keys. A test compares this with what the toolkit computes for the same folder.
"""

from __future__ import annotations

import json
import os
from typing import Any

from local_mode.container.container_layout import INSTANCE_GROUP_NAME, HostFolder

FRAMEWORK_PREFIX = "sagemaker_"
# The hyperparameter a tuning job adds to each of its training jobs; the toolkit keeps it from the script too.
TUNING_OBJECTIVE_HYPERPARAMETER = "_tuning_objective_metric"


def decode_hyperparameters(encoded: dict[str, str]) -> dict[str, Any]:
    """Undo the SDK's JSON encoding of each value (`"3"` -> 3, `"\\"listnet\\""` -> "listnet"); raw when not JSON."""
    decoded = {}
    for name, value in encoded.items():
        try:
            decoded[name] = json.loads(value)
        except (TypeError, ValueError):
            decoded[name] = value
    return decoded


def split_hyperparameters(decoded: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(framework parameters `sagemaker_*` and the tuning objective, user hyperparameters): the toolkit never passes
    the first to scripts."""
    framework = {name: value for name, value in decoded.items() if _is_framework_parameter(name)}
    user = {name: value for name, value in decoded.items() if not _is_framework_parameter(name)}
    return framework, user


def _is_framework_parameter(name: str) -> bool:
    return name.startswith(FRAMEWORK_PREFIX) or name == TUNING_OBJECTIVE_HYPERPARAMETER


def user_args(user_hyperparameters: dict[str, Any]) -> list[str]:
    """`--name value` pairs in sorted name order, values as `str()` gives them (True -> "True"), like the toolkit."""
    args = []
    for name in sorted(user_hyperparameters):
        value = user_hyperparameters[name]
        if isinstance(value, dict):
            value = ",".join(f"{key}={item}" for key, item in sorted(value.items()))
        args.extend([f"--{name}" if len(name) > 1 else f"-{name}", str(value)])
    return args


def _encode(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def training_environment(host: HostFolder, *, job_name: str, current_host: str, hosts: list[str], instance_type: str,
                         hyperparameters: dict[str, str], resource: dict[str, Any],
                         input_data: dict[str, Any]) -> dict[str, str]:
    """SM_* variables for the script on `current_host`, plus SAGEMAKER_BASE_DIR pointing at its folder and the
    TRAINING_JOB_NAME the service itself sets in every container."""
    framework, user = split_hyperparameters(decode_hyperparameters(hyperparameters))
    channels = sorted(input_data)
    channel_dirs = {channel: str(host.channel_dir(channel)) for channel in channels}
    entry_point = str(framework.get("sagemaker_program", ""))
    fields: dict[str, Any] = {
        "hosts": hosts,
        "network_interface_name": resource["network_interface_name"],
        "hps": user,
        "user_entry_point": entry_point,
        "framework_params": {},
        "resource_config": resource,
        "input_data_config": input_data,
        "output_data_dir": str(host.output_data_dir),
        "channels": channels,
        "current_host": current_host,
        "current_instance_type": instance_type,
        "current_instance_group": INSTANCE_GROUP_NAME,
        "current_instance_group_hosts": hosts,
        "instance_groups": [INSTANCE_GROUP_NAME],
        "instance_groups_dict": {INSTANCE_GROUP_NAME: resource["instance_groups"][0]},
        "distribution_instance_groups": [],
        "is_hetero": False,
        "framework_module": "",
        "module_name": entry_point.removesuffix(".py"),
        "log_level": int(framework.get("sagemaker_container_log_level", 20)),
        "input_dir": str(host.root / "input"),
        "input_config_dir": str(host.config_dir),
        "output_dir": str(host.output_dir),
        "num_cpus": os.cpu_count() or 1,
        # Local hosts train on CPU: scripts that pick a backend from SM_NUM_GPUS choose gloo.
        "num_gpus": 0,
        "num_neurons": 0,
        "output_intermediate_dir": str(host.output_dir / "intermediate"),
        "model_dir": str(host.model_dir),
        "module_dir": str(framework.get("sagemaker_submit_directory", "")),
        "user_args": user_args(user),
    }
    fields["training_env"] = {
        "hosts": hosts, "current_host": current_host, "channel_input_dirs": channel_dirs,
        "hyperparameters": user, "additional_framework_parameters": {}, "input_data_config": input_data,
        "resource_config": resource, "model_dir": fields["model_dir"], "output_data_dir": fields["output_data_dir"],
        "output_dir": fields["output_dir"], "input_dir": fields["input_dir"], "num_gpus": 0,
        "num_cpus": fields["num_cpus"], "module_name": fields["module_name"], "user_entry_point": entry_point,
        "job_name": job_name, "log_level": fields["log_level"],
        "current_instance_type": instance_type, "network_interface_name": fields["network_interface_name"],
    }
    fields.update({f"channel_{channel}": path for channel, path in channel_dirs.items()})
    fields.update({f"hp_{name}": value for name, value in user.items()})
    environment = {f"SM_{name.upper()}": _encode(value) for name, value in fields.items()}
    environment["SAGEMAKER_BASE_DIR"] = str(host.root)
    environment["SAGEMAKER_JOB_NAME"] = str(framework.get("sagemaker_job_name", ""))
    environment["SAGEMAKER_REGION"] = str(framework.get("sagemaker_region", ""))
    environment["CURRENT_HOST"] = current_host
    environment["TRAINING_JOB_NAME"] = job_name
    return environment
