"""Which files go into the job's sourcedir.tar.gz, under which names.

As SageMaker SDK v2 packs `PyTorch(source_dir=..., entry_point=..., dependencies=[...])`: the contents of the
source folder at the archive root, and each dependency folder beside them under its own folder name. A dependency
that already sits at that place inside the source folder is packed once. Synthesis validates the configuration with
these names, packs the archive from them, and ships the list to the trigger, whose preflight checks entry points
against it.

A stack that tracks experiments (`mlflow_resource_arn`) gives its jobs the tracking packages, and only those jobs pay
for installing them: their archive also holds the project's `requirements-tracking.txt`, and its `requirements.txt`
(the source folder's own, kept as it is, or a new one) ends with a line naming that file.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
REQUIREMENTS = "requirements.txt"  # what the container installs before launch
TRACKING_REQUIREMENTS = PROJECT_ROOT / "training_code" / "requirements-tracking.txt"
TRACKING_INCLUDE = (b"# Experiment tracking (the stack sets mlflow_resource_arn): MLflow's client and SageMaker's plugin\n"
                    b"-r " + TRACKING_REQUIREMENTS.name.encode() + b"\n")
# Bytecode caches are machine-specific; the Dockerfile builds the custom image and is no input to a job.
EXCLUDED_NAMES = frozenset({"__pycache__", ".pytest_cache", "Dockerfile", ".DS_Store"})
EXCLUDED_SUFFIXES = (".pyc", ".pyo")


class SourceLayoutError(ValueError):
    """A source folder or dependency that cannot be packed; the message names the key, the value and the fix."""


def project_path(text: str) -> Path:
    """A configured folder: absolute, or relative to the project root (where cdk.json lives)."""
    path = Path(text).expanduser()
    return (path if path.is_absolute() else PROJECT_ROOT / path).resolve()


Member = Path | bytes
"""A file of the archive: a file on disk, or the content synthesis wrote for it."""


def member_content(member: Member) -> bytes:
    return member if isinstance(member, bytes) else member.read_bytes()


def bundle_members(source_dir: Path, dependencies: Sequence[Path] = (), *, tracking: bool = False
                   ) -> dict[str, Member]:
    """Archive name -> file, sorted by name, for `source_dir` plus `dependencies` (resolved folders); with `tracking`,
    the tracking requirements too."""
    if not source_dir.is_dir():
        raise SourceLayoutError(f"source_dir={str(source_dir)!r} is not a folder: give the folder of the training "
                                f"code, relative to the project root or absolute")
    members = {path.relative_to(source_dir).as_posix(): path for path in _included_files(source_dir)}
    placed: dict[str, Path] = {}
    for dependency in dependencies:
        if not dependency.is_dir():
            raise SourceLayoutError(f"dependencies: {str(dependency)!r} is not a folder: give existing folders, "
                                    f"relative to the project root or absolute")
        name = dependency.name
        if dependency == (source_dir / name).resolve():
            continue  # already packed with the source folder, at the same place
        if name in placed or (source_dir / name).exists():
            other = placed.get(name, source_dir / name)
            raise SourceLayoutError(f"dependencies: {str(dependency)!r} would be packed as {name}/, which "
                                    f"{str(other)!r} already is: rename one of the folders")
        placed[name] = dependency
        members |= {f"{name}/{path.relative_to(dependency).as_posix()}": path for path in _included_files(dependency)}
    if tracking:
        members = _with_tracking_requirements(source_dir, members)
    return dict(sorted(members.items()))


def _with_tracking_requirements(source_dir: Path, members: dict[str, Member]) -> dict[str, Member]:
    """`members` plus the project's requirements-tracking.txt at the archive root, and a requirements.txt that ends
    by naming it (pip reads `-r` relative to the file that holds it)."""
    name = TRACKING_REQUIREMENTS.name
    own = members.get(name)
    if isinstance(own, Path) and own.read_bytes() != TRACKING_REQUIREMENTS.read_bytes():
        raise SourceLayoutError(f"source_dir={str(source_dir)!r} holds a {name} of its own ({own}), where a tracked "
                                f"job's {REQUIREMENTS} names the pipeline's (mlflow_resource_arn is set): rename that "
                                f"file")
    requirements = members.get(REQUIREMENTS)
    listed = requirements.read_bytes() if isinstance(requirements, Path) else b""
    if listed and not listed.endswith(b"\n"):
        listed += b"\n"
    return {**members, name: TRACKING_REQUIREMENTS, REQUIREMENTS: listed + TRACKING_INCLUDE}


def _included_files(folder: Path) -> list[Path]:
    return [path for path in folder.rglob("*")
            if path.is_file() and path.suffix not in EXCLUDED_SUFFIXES
            and not EXCLUDED_NAMES.intersection(path.relative_to(folder).parts)]
