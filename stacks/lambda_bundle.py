"""The trigger Lambda's asset folder: its code, the pure-Python distributions it lists and the files synthesis
generates for it, staged offline.

The bundle is built on whatever machine runs synthesis (x86, no Docker, no network) for an arm64 runtime,
so only pure-Python distributions may go in, copied from this environment: the listed ones at exactly the pinned
version, plus what they require (at the installed version) unless the Lambda runtime already provides it.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

_PIN = re.compile(r"^(?P<name>[A-Za-z0-9_.-]+)==(?P<version>[A-Za-z0-9_.+-]+)$")
_COMPILED_SUFFIXES = (".so", ".pyd", ".dylib", ".dll")
_SKIPPED_NAMES = frozenset({"__pycache__"})
# The AWS Lambda Python runtime ships these (boto3 and its dependencies); the bundle must not shadow them.
RUNTIME_PROVIDED = frozenset({"boto3", "botocore", "s3transfer", "jmespath", "python-dateutil", "urllib3", "six"})


class LambdaBundleError(RuntimeError):
    """The Lambda bundle cannot be built as its requirements file asks."""


def read_pins(requirements_file: Path) -> list[tuple[str, str]]:
    """`name==version` lines of a requirements file (comments and blank lines skipped)."""
    pins = []
    for number, raw in enumerate(requirements_file.read_text().splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = _PIN.match(line)
        if match is None:
            raise LambdaBundleError(f"{requirements_file}:{number}: {line!r} is not pinned: write it as name==version")
        pins.append((match["name"], match["version"]))
    return pins


def stage_lambda_bundle(function_dir: Path, staging_dir: Path, generated: Mapping[str, str] | None = None) -> Path:
    """Copy `function_dir` and its requirements' installed files into a fresh `staging_dir`, then write each
    `generated` file (path inside the bundle -> text), such as the settings synthesis fixes."""
    if staging_dir.exists():
        shutil.rmtree(staging_dir)
    shutil.copytree(function_dir, staging_dir, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "tests"))
    for relative, text in (generated or {}).items():
        target = staging_dir / relative
        if target.exists():
            raise LambdaBundleError(f"generated file {relative} would overwrite {function_dir / relative}: "
                                    "rename one of them")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    requirements_file = function_dir / "requirements.txt"
    pins = read_pins(requirements_file) if requirements_file.exists() else []
    for name, version in pins:
        _check_version(name, version)
    for distribution in _with_dependencies([name for name, _ in pins]):
        for source, relative in _distribution_files(distribution):
            target = staging_dir / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
    return staging_dir


def _check_version(name: str, version: str) -> None:
    installed = _installed(name, f"lambda requirement {name}=={version}").version
    if installed != version:
        raise LambdaBundleError(f"lambda requirement {name}=={version} but {installed} is installed: "
                                "make lambda/trigger/requirements.txt and requirements.txt pin the same version")


def _installed(name: str, wanted_by: str) -> metadata.Distribution:
    try:
        return metadata.distribution(name)
    except metadata.PackageNotFoundError:
        raise LambdaBundleError(f"{wanted_by} needs {name}, which is not installed: "
                                "pip install -r requirements.txt") from None


def _with_dependencies(names: list[str]) -> list[metadata.Distribution]:
    """The listed distributions and, transitively, their unconditional requirements the runtime lacks."""
    found: dict[str, metadata.Distribution] = {}
    pending = [(name, "lambda/trigger/requirements.txt") for name in names]
    while pending:
        name, wanted_by = pending.pop()
        key = canonicalize_name(name)
        if key in found or key in RUNTIME_PROVIDED:
            continue
        distribution = found[key] = _installed(name, wanted_by)
        for line in distribution.requires or []:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                pending.append((requirement.name, f"{name} (a lambda requirement)"))
    return [found[key] for key in sorted(found)]


def _distribution_files(distribution: metadata.Distribution) -> list[tuple[Path, Path]]:
    name, version = distribution.metadata["Name"], distribution.version
    files = []
    for entry in distribution.files or []:
        relative = Path(str(entry))
        if relative.parts[0] == ".." or _SKIPPED_NAMES.intersection(relative.parts) or relative.suffix == ".pyc":
            continue  # console scripts live outside site-packages; bytecode is rebuilt by the runtime
        if relative.suffix in _COMPILED_SUFFIXES:
            raise LambdaBundleError(f"lambda requirement {name}=={version} ships compiled file {relative}: the bundle "
                                    "is built offline for arm64, so only pure-Python distributions can go in")
        files.append((Path(str(entry.locate())), relative))
    return files
