"""Which environment variables a job may set (`CreateTrainingJob`'s `Environment`, SDK v2's
`PyTorch(environment={...})`), which of them this package reads, and why the others belong to someone else.

One table for every reader: synthesis (stacks/config.py loads this file by path and checks `default_environment`),
the trigger's preflight (its bundle carries a copy of this file) and the package itself (`collective_timeout` reads
its variable's name from `PACKAGE_SETTINGS`), so the names the package reads and the names the trigger refuses
cannot drift apart. Standard library only and importing nothing of the project, so each can load it alone; the API's
own limits (how many variables, how long, which names) come from botocore's SageMaker model, which each caller
passes in.

The names below are written by the platform after the job's environment is applied, or read by it to find out where
a process stands, so a value set per job is either silently replaced or misleads every process. Sources: the
sagemaker-training toolkit 5.1 (`environment.py`, `torch_distributed.py`, `smdataparallel.py`, `params.py`) and the
AWS PyTorch training images' Dockerfiles (aws/deep-learning-containers, `pytorch/training/docker/2.2/py3/cu121/
Dockerfile.gpu`).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

PREFIX_MARK = "*"


@dataclass(frozen=True)
class PackageSetting:
    """A variable `sagemaker_distributed` reads from the job's environment for users to set: accepted in a payload,
    a manifest and the stack's `default_environment` although its name lies in a namespace the platform owns."""

    name: str
    meaning: str


COLLECTIVE_TIMEOUT = PackageSetting(
    "SAGEMAKER_DISTRIBUTED_COLLECTIVE_TIMEOUT",
    "seconds a rank waits in a collective for the other ranks before the job fails naming them "
    "(sagemaker_distributed.collective_timeout; default 1800)")
PACKAGE_SETTINGS = (COLLECTIVE_TIMEOUT,)
_PACKAGE_SETTING_NAMES = tuple(setting.name for setting in PACKAGE_SETTINGS)


@dataclass(frozen=True)
class OwnedNames:
    """Variables a job may not set: exact names, or prefixes ending in `*`, under the listed distributions (None:
    under every one)."""

    names: tuple[str, ...]
    owner: str
    why: str
    distributions: tuple[str, ...] | None = None

    def owns(self, name: str, distribution: str) -> bool:
        """Whether this owner sets `name` under `distribution`; never for the package's own settings, which no
        owner writes (the toolkit and the images set none of them)."""
        return (name not in _PACKAGE_SETTING_NAMES
                and (self.distributions is None or distribution in self.distributions)
                and any(name.startswith(owned[:-1]) if owned.endswith(PREFIX_MARK) else name == owned
                        for owned in self.names))


OWNED_NAMES = (
    OwnedNames(("SM_*",), "the SageMaker training toolkit",
               "it writes SM_HOSTS, SM_CHANNEL_<NAME>, SM_HPS, SM_MODEL_DIR and the rest from the job's own "
               "configuration over any value given, and reads others the AWS images set (SM_DLC_TORCH_VERSION); "
               "under launch model_trainer, SDK v3 ModelTrainer's drivers write theirs the same way "
               "(sagemaker-train's container_drivers/scripts/environment.py)"),
    OwnedNames(("SAGEMAKER_*",), "SageMaker and its training toolkit",
               "SAGEMAKER_TRAINING_MODULE starts the toolkit in the AWS images, SAGEMAKER_BASE_DIR moves /opt/ml, "
               "and the toolkit writes SAGEMAKER_JOB_NAME and SAGEMAKER_REGION from the trigger's sagemaker_* "
               "hyperparameters"),
    OwnedNames(("CURRENT_HOST", "TRAINING_JOB_NAME", "PYTHONPATH"), "the SageMaker training toolkit",
               "it sets the host's and the job's names, and the script's import path (its code folder first), "
               "before it starts the script"),
    OwnedNames(("PATH", "LD_LIBRARY_PATH", "LD_PRELOAD"), "the AWS PyTorch image",
               "its Dockerfile sets them to find Python, CUDA, MPI and NCCL's EFA plugin (the 2.2 image preloads "
               "libnccl-net.so), and a job's value replaces the image's instead of adding to it"),
    OwnedNames(("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_CONTAINER_CREDENTIALS_*"),
               "the job's execution role",
               "the job's AWS credentials come from its role; keys here would override it and are shown in plain "
               "text by DescribeTrainingJob"),
    OwnedNames(("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
                "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_*",
                "OMPI_*"),
               "the launcher (torchrun, mpirun)",
               "it sets them for each process it starts, and sagemaker_distributed.topology reads them to tell "
               "which launcher started a process and its rank: one value for every process would give them all "
               "the same rank"),
    OwnedNames(("NCCL_SOCKET_IFNAME", "NCCL_PROTO", "FI_PROVIDER", "FI_EFA_USE_DEVICE_RDMA", "RDMAV_FORK_SAFE"),
               "the toolkit's torchrun launcher",
               "before it starts torchrun it sets NCCL_SOCKET_IFNAME to the instance's network interface and "
               "NCCL_PROTO=simple, and on EFA instances FI_PROVIDER=efa, FI_EFA_USE_DEVICE_RDMA=1 and "
               "RDMAV_FORK_SAFE=1, over any value given; ModelTrainer's torchrun driver (launch model_trainer) sets "
               "the same ones (torchrun_driver.py, setup_env)",
               distributions=("torch_distributed",)),
    OwnedNames(("NCCL_SOCKET_IFNAME", "NCCL_DEBUG", "NCCL_PROTO", "FI_PROVIDER", "FI_EFA_USE_DEVICE_RDMA",
                "RDMAV_FORK_SAFE", "SMDATAPARALLEL_*"),
               "the toolkit's SMDDP launcher",
               "mpirun hands every rank its own values (`-x`): NCCL_DEBUG=INFO, the network interface, SMDDP's "
               "settings and on EFA instances the EFA ones, over any value given",
               distributions=("pytorchddp", "smdistributed")),
)


@dataclass(frozen=True)
class EnvironmentLimits:
    """What CreateTrainingJob's API model allows in an environment map."""

    max_variables: int
    max_name_length: int
    name_pattern: str
    max_value_length: int
    value_pattern: str

    @classmethod
    def of(cls, map_shape: Any) -> EnvironmentLimits:
        """From botocore's shape of an environment map: `TrainingEnvironmentMap` (CreateTrainingJob, 100 variables)
        or `HyperParameterTrainingJobEnvironmentMap` (a tuning job's training definition, 48). Both patterns are
        character classes, which Java (the API's regular expressions) and Python read alike."""
        return cls(max_variables=map_shape.metadata["max"], max_name_length=map_shape.key.metadata["max"],
                   name_pattern=map_shape.key.metadata["pattern"], max_value_length=map_shape.value.metadata["max"],
                   value_pattern=map_shape.value.metadata["pattern"])


def create_training_job_limits(service_model: Any) -> EnvironmentLimits:
    """CreateTrainingJob's `Environment` limits in botocore's SageMaker service model."""
    return EnvironmentLimits.of(service_model.operation_model("CreateTrainingJob").input_shape.members["Environment"])


def environment_type_errors(environment: Any, where: str) -> list[str]:
    """An object of string values (SageMaker takes text only), or one error saying what to write instead."""
    if not isinstance(environment, Mapping):
        return [f"{where}={environment!r} is not an object: give variables as {{\"NCCL_DEBUG\": \"INFO\"}}"]
    return [f"{where}.{name}={value!r} is not a string: environment values are text; quote it, e.g. \"{value}\""
            for name, value in environment.items() if not isinstance(value, str)]


def environment_errors(environment: Mapping[str, str], where: str, *, distribution: str,
                       limits: EnvironmentLimits) -> list[str]:
    """Errors for a job's environment under `distribution`: the API's limits, then the names others own. Each
    names the variable, why it is refused and the fix; `where` is the field the user set (e.g. `environment`)."""
    errors = environment_type_errors(environment, where)
    if errors:
        return errors
    if len(environment) > limits.max_variables:
        errors.append(f"{where}: {len(environment)} variables exceed SageMaker's {limits.max_variables} per job: "
                      f"drop {len(environment) - limits.max_variables}")
    for name, value in environment.items():
        if len(name) > limits.max_name_length or not re.fullmatch(limits.name_pattern, name):
            errors.append(f"{where}: {name!r} is not a variable name SageMaker accepts ({limits.name_pattern!r}, "
                          f"at most {limits.max_name_length} characters): use letters, digits and '_', not starting "
                          f"with a digit")
        elif len(value) > limits.max_value_length or not re.fullmatch(limits.value_pattern, value):
            errors.append(f"{where}.{name}: the value is {len(value)} characters, over SageMaker's "
                          f"{limits.max_value_length}: shorten it, or pass a longer setting as a file in a channel")
        owner = next((owned for owned in OWNED_NAMES if owned.owns(name, distribution)), None)
        if owner is not None:
            under = "" if owner.distributions is None else f" under distribution {distribution!r}"
            errors.append(f"{where}.{name} is set by {owner.owner}{under}: {owner.why}; remove it"
                          + _package_setting_hint(name))
    return errors


def _package_setting_hint(name: str) -> str:
    """A refused name close to one the package reads is most likely that one, misspelt."""
    close = difflib.get_close_matches(name, _PACKAGE_SETTING_NAMES, n=1, cutoff=0.8)
    return f", or did you mean {close[0]!r}, which sagemaker_distributed reads?" if close else ""
