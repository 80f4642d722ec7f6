"""The trigger Lambda's asset folder: its code plus the pure-Python distributions it lists, staged offline.

The bundle is built on whatever machine runs synthesis (x86, no Docker, no network) for an arm64 runtime,
so only pure-Python distributions may go in, copied from this environment at exactly the pinned version.
"""

from __future__ import annotations

import re
import shutil
from importlib import metadata
from pathlib import Path

_PIN = re.compile(r"^(?P<name>[A-Za-z0-9_.-]+)==(?P<version>[A-Za-z0-9_.+-]+)$")
_COMPILED_SUFFIXES = (".so", ".pyd", ".dylib", ".dll")
_SKIPPED_NAMES = frozenset({"__pycache__"})


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


def stage_lambda_bundle(function_dir: Path, staging_dir: Path) -> Path:
    """Copy `function_dir` and its requirements' installed files into a fresh `staging_dir`."""
    if staging_dir.exists():
        shutil.rmtree(staging_dir)
    shutil.copytree(function_dir, staging_dir, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "tests"))
    requirements_file = function_dir / "requirements.txt"
    pins = read_pins(requirements_file) if requirements_file.exists() else []
    for name, version in pins:
        for source, relative in _distribution_files(name, version):
            target = staging_dir / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
    return staging_dir


def _distribution_files(name: str, version: str) -> list[tuple[Path, Path]]:
    try:
        distribution = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        raise LambdaBundleError(
            f"lambda requirement {name}=={version} is not installed: pip install -r requirements.txt") from None
    if distribution.version != version:
        raise LambdaBundleError(f"lambda requirement {name}=={version} but {distribution.version} is installed: "
                                "make lambda/trigger/requirements.txt and requirements.txt pin the same version")
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
