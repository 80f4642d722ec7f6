"""What the service uploads after training: model.tar.gz (the model dir) and output.tar.gz (output/data)."""

from __future__ import annotations

import tarfile
from pathlib import Path


def tar_folder_contents(folder: Path, archive: Path) -> Path:
    """A gzip tarball with `folder`'s contents at its root, as SageMaker packs /opt/ml/model."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "w:gz") as tar:
        for path in sorted(folder.rglob("*")):
            tar.add(path, arcname=path.relative_to(folder).as_posix(), recursive=False)
    return archive


def unpack_archive(archive: Path, destination: Path) -> None:
    """Extract a sourcedir.tar.gz or model.tar.gz into `destination` (the `data` filter refuses paths that escape
    it)."""
    with tarfile.open(archive) as tar:
        tar.extractall(destination, filter="data")
