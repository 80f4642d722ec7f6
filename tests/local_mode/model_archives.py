"""What a finished job's model.tar.gz holds, read back from local S3."""

from __future__ import annotations

import io
import json
import tarfile
from typing import Any

from local_mode.aws.s3_transfer import split_s3_uri


def model_archive(s3: Any, artifact: str) -> tarfile.TarFile:
    bucket, key = split_s3_uri(artifact)
    return tarfile.open(fileobj=io.BytesIO(s3.get_object(Bucket=bucket, Key=key)["Body"].read()))


def model_members(s3: Any, artifact: str) -> list[str]:
    with model_archive(s3, artifact) as tar:
        return tar.getnames()


def model_json(s3: Any, artifact: str, member: str) -> Any:
    with model_archive(s3, artifact) as tar:
        return json.loads(tar.extractfile(member).read())
