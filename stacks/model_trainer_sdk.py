"""SageMaker Python SDK v3's ModelTrainer as synthesis reads it: its container drivers, its `sm_train.sh` templates
and the entrypoint it sends, from the pinned package in the side environment `.venv-sdk3` (`make setup`).

`.venv` holds SDK v2, whose `sagemaker` namespace v3 shares, so v3 lives in its own environment and nothing of it is
imported here: each file is read as bytes and checked against its package's RECORD (the sha256 the wheel shipped),
and the package's version against constraints-sdk3.txt, so a job gets exactly the pinned release's files. The two
small modules with no imports of the SDK (`constants.py`, `templates.py`) are run in a namespace of their own for
their string constants.
"""

from __future__ import annotations

import base64
import csv
import functools
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stacks.source_layout import PROJECT_ROOT

SDK3_VENV = PROJECT_ROOT / ".venv-sdk3"
SDK3_CONSTRAINTS = PROJECT_ROOT / "constraints-sdk3.txt"
TRAIN_PACKAGE, CORE_PACKAGE = "sagemaker-train", "sagemaker-core"
DRIVERS_DIR = "sagemaker/train/container_drivers"
# ModelTrainer copies this sagemaker-core module beside its drivers as scripts/install_requirements.py.
INSTALL_REQUIREMENTS = "sagemaker/core/utils/install_requirements.py"


class SdkUnavailable(RuntimeError):
    """The side environment is missing or holds other files than the pinned release; the message says what to run."""


@dataclass(frozen=True)
class InstalledPackage:
    """One distribution in the side environment's site-packages, with the sha256 of each file its RECORD lists."""

    name: str
    version: str
    site_packages: Path
    digests: Mapping[str, str]

    def read(self, relative: str) -> bytes:
        """The file's bytes, refused unless they are the ones the release shipped."""
        expected = self.digests.get(relative)
        if expected is None:
            raise SdkUnavailable(f"{self.name} {self.version} ships no {relative}: the drivers' layout changed; "
                                 f"compare stacks/model_trainer_sdk.py with the package")
        data = (self.site_packages / relative).read_bytes()
        if _record_digest(data) != expected:
            raise SdkUnavailable(f"{self.site_packages / relative} differs from {self.name} {self.version}'s release: "
                                 f"rebuild the side environment (rm -rf {SDK3_VENV.name} && make setup)")
        return data

    def files_under(self, folder: str) -> list[str]:
        """Every file the release installed below `folder`, bytecode caches aside (they are the installing machine's
        and no part of the package)."""
        return sorted(name for name in self.digests
                      if name.startswith(f"{folder}/") and "__pycache__" not in name.split("/"))


def pinned_version(package: str, constraints: Path = SDK3_CONSTRAINTS) -> str:
    """`package`'s version in the constraints file, the one place the side environment's versions are pinned."""
    match = re.search(rf"^{re.escape(package)}==(\S+)$", constraints.read_text(), flags=re.MULTILINE)
    if match is None:
        raise SdkUnavailable(f"{constraints.name} pins no {package}: add '{package}==<version>'")
    return match[1]


def installed_package(package: str, venv: Path = SDK3_VENV) -> InstalledPackage:
    """The pinned `package` in `venv`; raises SdkUnavailable naming the fix when it is missing or another version."""
    version = pinned_version(package)
    distribution = package.replace("-", "_")
    records = sorted(venv.glob(f"lib/python3*/site-packages/{distribution}-*.dist-info/RECORD"))
    if not records:
        raise SdkUnavailable(f"{venv} has no {package}: run `make setup`, which builds the side environment with "
                             f"SageMaker Python SDK v3 from requirements-sdk3.txt (the model_trainer launch's drivers "
                             f"are read from it at synthesis)")
    found = {record.parent.name.removeprefix(f"{distribution}-").removesuffix(".dist-info"): record
             for record in records}
    if version not in found:
        raise SdkUnavailable(f"{venv} has {package} {sorted(found)}, not the pinned {version}: rebuild it "
                             f"(rm -rf {venv.name} && make setup)")
    record = found[version]
    with record.open(newline="") as lines:
        digests = {row[0]: row[1].removeprefix("sha256=") for row in csv.reader(lines) if row[1].startswith("sha256=")}
    return InstalledPackage(package, version, record.parents[1], digests)


def _record_digest(data: bytes) -> str:
    """A RECORD's hash: urlsafe base64 of the sha256, without padding (the wheel format's rule)."""
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


@dataclass(frozen=True)
class ModelTrainerSdk:
    """What synthesis takes from the pinned SDK v3."""

    train: InstalledPackage
    core: InstalledPackage

    @functools.cached_property
    def constants(self) -> dict[str, Any]:
        """sagemaker/train/constants.py's names (channel names, container paths, the entrypoint and arguments)."""
        return _module_constants(self.train.read("sagemaker/train/constants.py"), "constants.py")

    @functools.cached_property
    def templates(self) -> dict[str, Any]:
        """sagemaker/train/templates.py's `sm_train.sh` template and the snippets it is filled with."""
        return _module_constants(self.train.read("sagemaker/train/templates.py"), "templates.py")

    def driver_files(self) -> dict[str, bytes]:
        """What ModelTrainer copies into every `sm_drivers` channel before writing its own three files: the package's
        container_drivers folder, and sagemaker-core's requirements installer as scripts/install_requirements.py."""
        files = {name.removeprefix(f"{DRIVERS_DIR}/"): self.train.read(name)
                 for name in self.train.files_under(DRIVERS_DIR)}
        files["scripts/install_requirements.py"] = self.core.read(INSTALL_REQUIREMENTS)
        return files


def _module_constants(source: bytes, name: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__file__": name, "__name__": name}
    exec(compile(source, name, "exec"), namespace)  # noqa: S102 -- the release's own bytes, checked against RECORD
    return {key: value for key, value in namespace.items() if key.isupper()}


@functools.cache
def model_trainer_sdk() -> ModelTrainerSdk:
    """The pinned SDK v3 of the side environment, read once per synthesis."""
    return ModelTrainerSdk(train=installed_package(TRAIN_PACKAGE), core=installed_package(CORE_PACKAGE))
