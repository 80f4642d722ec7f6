"""Which files go into the job's sourcedir.tar.gz, under which names.

As SageMaker SDK v2 packs `PyTorch(source_dir=..., entry_point=..., dependencies=[...])`: the contents of the
source folder at the archive root, and each dependency folder beside them under its own folder name. A dependency
that already sits at that place inside the source folder is packed once. Synthesis validates the configuration with
these names, packs the archive from them, and ships the list to the trigger, whose preflight checks entry points
against it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
# Bytecode caches are machine-specific; the Dockerfile builds the custom image and is no input to a job.
EXCLUDED_NAMES = frozenset({"__pycache__", ".pytest_cache", "Dockerfile", ".DS_Store"})
EXCLUDED_SUFFIXES = (".pyc", ".pyo")


class SourceLayoutError(ValueError):
    """A source folder or dependency that cannot be packed; the message names the key, the value and the fix."""


def project_path(text: str) -> Path:
    """A configured folder: absolute, or relative to the project root (where cdk.json lives)."""
    path = Path(text).expanduser()
    return (path if path.is_absolute() else PROJECT_ROOT / path).resolve()


def bundle_members(source_dir: Path, dependencies: Sequence[Path] = ()) -> dict[str, Path]:
    """Archive name -> file, sorted by name, for `source_dir` plus `dependencies` (resolved folders)."""
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
    return dict(sorted(members.items()))


def _included_files(folder: Path) -> list[Path]:
    return [path for path in folder.rglob("*")
            if path.is_file() and path.suffix not in EXCLUDED_SUFFIXES
            and not EXCLUDED_NAMES.intersection(path.relative_to(folder).parts)]
