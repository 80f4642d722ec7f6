"""The training code as SageMaker's `sourcedir.tar.gz`: packed deterministically and shipped as a CDK asset.

Same code, same bytes, same asset hash: an unchanged `training_code/` never produces a new upload or a new
Lambda configuration, and a changed file always does.
"""

from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path

from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

BUNDLE_NAME = "sourcedir.tar.gz"
# Bytecode caches are machine-specific; the Dockerfile builds the custom image and is no input to a job.
_EXCLUDED_NAMES = frozenset({"__pycache__", ".pytest_cache", "Dockerfile", ".DS_Store"})
_EXCLUDED_SUFFIXES = (".pyc", ".pyo")
_FIXED_MTIME = 0


def pack_source_dir(source_dir: Path, bundle_path: Path) -> Path:
    """Write `source_dir`'s contents (at the archive root, sorted, fixed metadata) to `bundle_path`."""
    if not source_dir.is_dir():
        raise FileNotFoundError(f"training code folder {source_dir} does not exist: it is the SageMaker source_dir")
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in _included_files(source_dir):
            info = tarfile.TarInfo(path.relative_to(source_dir).as_posix())
            data = path.read_bytes()
            info.size = len(data)
            info.mtime = _FIXED_MTIME
            info.mode = 0o755 if path.stat().st_mode & 0o111 else 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    bundle_path.parent.mkdir(parents=True, exist_ok=True)
    # gzip writes the file name and a timestamp into its header unless told not to.
    with open(bundle_path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
        gz.write(archive.getvalue())
    return bundle_path


def _included_files(source_dir: Path) -> list[Path]:
    files = []
    for path in source_dir.rglob("*"):
        relative_parts = path.relative_to(source_dir).parts
        if any(part in _EXCLUDED_NAMES for part in relative_parts) or path.suffix in _EXCLUDED_SUFFIXES:
            continue
        if path.is_file():
            files.append(path)
    return sorted(files, key=lambda path: path.relative_to(source_dir).as_posix())


class TrainingSourceBundle(Construct):
    """`training_code/` packed at synthesis and uploaded as a file asset; `s3_uri` goes to the trigger."""

    def __init__(self, scope: Construct, construct_id: str, *, source_dir: Path, build_dir: Path) -> None:
        super().__init__(scope, construct_id)
        bundle = pack_source_dir(source_dir, build_dir / BUNDLE_NAME)
        self.asset = s3_assets.Asset(self, "SourceDirArchive", path=str(bundle))
        self.s3_uri: str = self.asset.s3_object_url

    def grant_read(self, grantee: iam.IGrantable) -> None:
        # This one object only: Asset.grant_read would open every asset in the CDK bootstrap bucket.
        iam.Grant.add_to_principal(grantee=grantee, actions=["s3:GetObject"],
                                   resource_arns=[self.asset.bucket.arn_for_objects(self.asset.s3_object_key)])
