"""The training code as SageMaker's `sourcedir.tar.gz`: packed deterministically and shipped as a CDK asset.

Same code, same bytes, same asset hash: an unchanged source folder never produces a new upload or a new Lambda
configuration, and a changed file always does. What goes in, under which names: stacks/source_layout.py.
"""

from __future__ import annotations

import gzip
import io
import tarfile
from collections.abc import Mapping
from pathlib import Path

from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from stacks.source_layout import Member, bundle_members, member_content

BUNDLE_NAME = "sourcedir.tar.gz"
_FIXED_MTIME = 0


def pack_source_dir(source_dir: Path, bundle_path: Path, dependencies: tuple[Path, ...] = ()) -> Path:
    """Write `source_dir`'s contents and `dependencies` (at the archive root, sorted, fixed metadata) to
    `bundle_path`."""
    return pack_members(bundle_members(source_dir, dependencies), bundle_path)


def pack_members(members: Mapping[str, Member], bundle_path: Path) -> Path:
    """Write the files of `members` (archive name -> file, or its content) in name order with fixed metadata to
    `bundle_path`."""
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(members):
            member = members[name]
            info = tarfile.TarInfo(name)
            data = member_content(member)
            info.size = len(data)
            info.mtime = _FIXED_MTIME
            executable = isinstance(member, Path) and member.stat().st_mode & 0o111
            info.mode = 0o755 if executable else 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    bundle_path.parent.mkdir(parents=True, exist_ok=True)
    # gzip writes the file name and a timestamp into its header unless told not to.
    with open(bundle_path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
        gz.write(archive.getvalue())
    return bundle_path


class TrainingSourceBundle(Construct):
    """The files of `members` (stacks/source_layout.py) packed at synthesis and uploaded as a file asset; `s3_uri`
    goes to the trigger."""

    def __init__(self, scope: Construct, construct_id: str, *, members: Mapping[str, Member], build_dir: Path) -> None:
        super().__init__(scope, construct_id)
        bundle = pack_members(members, build_dir / BUNDLE_NAME)
        self.asset = s3_assets.Asset(self, "SourceDirArchive", path=str(bundle))
        self.s3_uri: str = self.asset.s3_object_url

    def grant_read(self, grantee: iam.IGrantable, *, as_channel: bool) -> None:
        """Read this one object (Asset.grant_read would open every asset in the CDK bootstrap bucket); `as_channel`:
        also list it, as SageMaker lists an S3Prefix channel's prefix (the `code` channel of isolated jobs)."""
        key = self.asset.s3_object_key
        iam.Grant.add_to_principal(grantee=grantee, actions=["s3:GetObject"],
                                   resource_arns=[self.asset.bucket.arn_for_objects(key)])
        if as_channel:
            # The prefix is the whole key: the listing can show this object and no other stack's asset.
            iam.Grant.add_to_principal(grantee=grantee, actions=["s3:ListBucket"],
                                       resource_arns=[self.asset.bucket.bucket_arn],
                                       conditions={"StringEquals": {"s3:prefix": key}})
