"""The AWS PyTorch training containers (DLCs) a job may run in, and which distributions and instances each allows.

One table for every reader: synthesis (stacks/config.py loads this file by path), the trigger's preflight (its
bundle carries a copy of this file) and local mode. Standard library only, so each can load it without the
training code's dependencies.

Sources: the SageMaker Python SDK v2 (2.257.x) tables -- `image_uris` knows training images up to 2.8.0, SMDDP
(`smdistributed`, and `pytorchddp`, which the SDK rewrites to it) is accepted up to 2.2.0, `torch_distributed` on GPU
only for the versions in its list -- and the DLC build files (Python, numpy line). The training code has CUDA and CPU
paths only and needs torch >= 2.2, which sets the oldest profile.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

SMDDP_DISTRIBUTIONS = ("pytorchddp", "smdistributed")
DISTRIBUTIONS = ("none", "torch_distributed", *SMDDP_DISTRIBUTIONS)

# How the container starts the entry point: the image's SageMaker training toolkit (`sagemaker_program`, as SDK v2's
# `PyTorch` estimator sends it) or the drivers SDK v3's `ModelTrainer` ships in its `sm_drivers` channel.
TOOLKIT_LAUNCH, MODEL_TRAINER_LAUNCH = "toolkit", "model_trainer"
LAUNCHES = (TOOLKIT_LAUNCH, MODEL_TRAINER_LAUNCH)
# ModelTrainer's driver for each distribution the launch runs: `distributed=None` (its basic script driver) and
# `Torchrun()`. SDK v3 has no SMDDP, and its `MPI()` driver passes the per-host process count as mpirun's -np, so on
# several hosts only the first host's ranks would start: the MPI distributions stay with the toolkit.
MODEL_TRAINER_DRIVERS = {"none": "basic", "torch_distributed": "torchrun"}
MODEL_TRAINER_DISTRIBUTIONS = tuple(MODEL_TRAINER_DRIVERS)

# The SDK's SMDDP instance list without ml.p3.16xlarge: AWS dropped SMDDP on it. The SDK refuses p5 unless torchrun
# launches SMDDP, which the pipeline does not do.
SMDDP_INSTANCE_TYPES = ("ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.p3dn.24xlarge")

# What each distribution's default job runs on: the smallest instance on which it starts more than one process
# (SMDDP: the only kind it allows; torch_distributed: 4 GPUs), and one GPU where nothing is distributed.
DEFAULT_INSTANCE_TYPES = {
    "none": "ml.g5.2xlarge",
    "torch_distributed": "ml.g5.12xlarge",
    "pytorchddp": "ml.p4d.24xlarge",
    "smdistributed": "ml.p4d.24xlarge",
}

_INSTANCE_TYPE = re.compile(r"^ml\.(?P<family>[a-z0-9]+)\.(?P<size>[a-z0-9]+)$")


@dataclass(frozen=True)
class ContainerProfile:
    """One AWS PyTorch training image line, as the job sees it."""

    framework_version: str
    """The DLC's PyTorch version, as `framework_version` names it; also the exact torch the job must not move."""
    python_version: str
    """The image's Python, as the SDK spells it (`py310`)."""
    distributions: tuple[str, ...]
    """The distributions the SDK accepts with this image on GPU instances."""
    numpy_major: int
    """The image's numpy major version, which the job's requirements must not change."""

    @property
    def name(self) -> str:
        return f"{self.framework_version}-{self.python_version}"

    @property
    def smddp(self) -> bool:
        """Whether the image ships SageMaker's SMDDP library and the SDK accepts SMDDP distributions with it."""
        return any(distribution in self.distributions for distribution in SMDDP_DISTRIBUTIONS)

    @property
    def interpreter(self) -> str:
        """`3.10` for `py310`."""
        digits = self.python_version.removeprefix("py")
        return f"{digits[0]}.{digits[1:]}"


_PLAIN = ("none",)
_TORCHRUN = ("none", "torch_distributed")
_SMDDP = (*_TORCHRUN, *SMDDP_DISTRIBUTIONS)

# Oldest first. 2.4.0 has no torch_distributed: the SDK's list names 2.4.1, for which there is no training image.
PROFILES = (
    ContainerProfile("2.2.0", "py310", distributions=_SMDDP, numpy_major=1),
    ContainerProfile("2.3.0", "py311", distributions=_TORCHRUN, numpy_major=1),
    ContainerProfile("2.4.0", "py311", distributions=_PLAIN, numpy_major=1),
    ContainerProfile("2.5.1", "py311", distributions=_TORCHRUN, numpy_major=1),
    ContainerProfile("2.6.0", "py312", distributions=_TORCHRUN, numpy_major=1),
    ContainerProfile("2.7.1", "py312", distributions=_TORCHRUN, numpy_major=1),
    ContainerProfile("2.8.0", "py312", distributions=_TORCHRUN, numpy_major=1),
)


def profile_named(framework_version: str) -> ContainerProfile | None:
    return next((profile for profile in PROFILES if profile.framework_version == framework_version), None)


def supported_versions() -> list[str]:
    return [profile.framework_version for profile in PROFILES]


def default_profile(distribution: str) -> ContainerProfile:
    """The newest profile whose image runs `distribution`: SMDDP modes land on 2.2.0, the others on the newest."""
    return next(profile for profile in reversed(PROFILES) if distribution in profile.distributions)


def instance_family(instance_type: str) -> str | None:
    """`p4d` for `ml.p4d.24xlarge`; None for a name that is not `ml.<family>.<size>`."""
    match = _INSTANCE_TYPE.match(instance_type)
    return match["family"] if match else None


def instance_type_errors(instance_type: Any, where: str, known: Collection[str]) -> list[str]:
    """An instance type SageMaker trains on: `ml.<family>.<size>` and one of `known`, the training instance types of
    botocore's SageMaker model (`TrainingInstanceType`), which each caller reads from its own botocore; the closest
    names are suggested. Synthesis applies it to `instance_type`, the trigger to every job's."""
    if not (isinstance(instance_type, str) and _INSTANCE_TYPE.match(instance_type)):
        return [f"{where}={instance_type!r} is not a SageMaker instance type: use the form ml.<family>.<size>, e.g. "
                f"'ml.g5.12xlarge'"]
    if instance_type not in known:
        close = difflib.get_close_matches(instance_type, list(known), n=3)
        hint = f"did you mean {close}?" if close else "see the SageMaker pricing page for training instance types"
        return [f"{where}={instance_type!r} is not a training instance type SageMaker knows: {hint}"]
    return []


def instance_kind(instance_type: str) -> str:
    """'gpu', 'neuron' (Trainium, Inferentia) or 'cpu'."""
    family = instance_family(instance_type) or ""
    if family.startswith(("p", "g")):
        return "gpu"
    if family.startswith(("trn", "inf")):
        return "neuron"
    return "cpu"


def framework_errors(framework_version: str, python_version: str) -> list[str]:
    """Whether the image is one the project supports, with the Python that image has."""
    profile = profile_named(framework_version)
    if profile is None:
        return [f"framework_version={framework_version!r} is not a supported AWS PyTorch container: use one of "
                f"{supported_versions()} (see docs/container-profiles.md)"]
    if python_version != profile.python_version:
        return [f"python_version={python_version!r} does not match the PyTorch {framework_version} container, which "
                f"has {profile.python_version}: use {profile.python_version!r} (or leave python_version unset)"]
    return []


def model_trainer_scripts(files: Collection[str]) -> list[str]:
    """The scripts of a source folder (`files`: paths inside it) that the `model_trainer` launch can start: the
    Python files at its top, for each of which synthesis writes ModelTrainer's `sourcecode.json`."""
    return sorted(name for name in files if "/" not in name and name.endswith(".py"))


def launch_errors(*, launch: str, distribution: str, entry_point: str, files: Collection[str],
                  where: str = "launch") -> list[str]:
    """Why `launch` cannot start `entry_point` (a path among `files`, the source folder's) under `distribution`;
    empty when it can. Synthesis applies it to the stack's defaults, the trigger to every job (`where` names the
    field as the caller's user wrote it)."""
    if launch not in LAUNCHES:
        return [f"{where}={launch!r} is not one of {list(LAUNCHES)}: {TOOLKIT_LAUNCH!r} (the image's training "
                f"toolkit) or {MODEL_TRAINER_LAUNCH!r} (SageMaker Python SDK v3's ModelTrainer drivers)"]
    if launch != MODEL_TRAINER_LAUNCH:
        return []
    errors = []
    if distribution not in MODEL_TRAINER_DISTRIBUTIONS:
        errors.append(f"{where}={launch!r} runs distribution {' or '.join(map(repr, MODEL_TRAINER_DISTRIBUTIONS))}, "
                      f"not distribution={distribution!r}: SDK v3 has no SMDDP and its MPI driver starts only the "
                      f"first host's processes on several hosts; use {where} {TOOLKIT_LAUNCH!r}, or distribution "
                      f"'torch_distributed'")
    scripts = model_trainer_scripts(files)
    if entry_point not in scripts:
        errors.append(f"{where}={launch!r} starts a Python script at the top of source_dir, not "
                      f"entry_point={entry_point!r}: use one of {scripts}, or {where} {TOOLKIT_LAUNCH!r}")
    return errors


def distribution_errors(*, distribution: str, instance_type: str, framework_version: str,
                        image_source: str) -> list[str]:
    """Why `distribution` cannot run on `instance_type` in that image; empty when it can.

    A custom image is built on the DLC `framework_version` names but may add what the DLC lacks (SMDDP), so only the
    instance rules bind it.
    """
    errors = []
    kind = instance_kind(instance_type)
    if kind == "neuron":
        errors.append(f"instance_type={instance_type!r} is a Trainium/Inferentia (Neuron) instance: the training "
                      f"code runs on CUDA GPUs and CPUs only; use a GPU type such as "
                      f"{DEFAULT_INSTANCE_TYPES[distribution]!r}")
    elif distribution in SMDDP_DISTRIBUTIONS and instance_type.startswith("ml.p5"):
        errors.append(f"distribution={distribution!r} on instance_type={instance_type!r}: SMDDP does not run on p5 "
                      f"unless torchrun launches it; use distribution 'torch_distributed'")
    elif distribution in SMDDP_DISTRIBUTIONS and instance_type not in SMDDP_INSTANCE_TYPES:
        errors.append(f"distribution={distribution!r} needs an SMDDP instance {list(SMDDP_INSTANCE_TYPES)}, not "
                      f"instance_type={instance_type!r}: pick one, or use distribution 'torch_distributed'")
    elif distribution == "torch_distributed" and kind != "gpu":
        errors.append(f"distribution='torch_distributed' needs a GPU instance, not instance_type={instance_type!r}: "
                      f"pick e.g. {DEFAULT_INSTANCE_TYPES['torch_distributed']!r}, or use distribution 'none'")
    profile = profile_named(framework_version)
    if image_source == "dlc" and profile is not None and distribution not in profile.distributions:
        supporting = [p.framework_version for p in PROFILES if distribution in p.distributions]
        errors.append(f"distribution={distribution!r} does not run in the AWS PyTorch {framework_version} container "
                      f"(it allows {list(profile.distributions)}): use framework_version one of {supporting}, "
                      f"another distribution, or a custom image")
    return errors
