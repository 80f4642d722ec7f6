"""Moving files between a local folder and S3 the way SageMaker does for channels, checkpoints and artifacts."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlparse


def split_s3_uri(uri: str) -> tuple[str, str]:
    """`s3://bucket/key/prefix` -> (`bucket`, `key/prefix`)."""
    parsed = urlparse(uri)
    if parsed.scheme != "s3" or not parsed.netloc:
        raise ValueError(f"S3 URI {uri!r} is not of the form s3://bucket/prefix: fix the S3Uri/S3OutputPath")
    return parsed.netloc, parsed.path.lstrip("/")


def join_s3_uri(base: str, *parts: str) -> str:
    """`join_s3_uri("s3://b/models/", "job", "output")` -> `s3://b/models/job/output` (one slash between parts)."""
    return "/".join([base.rstrip("/"), *(part.strip("/") for part in parts)])


def list_keys(s3: Any, uri: str) -> list[str]:
    """Every key under `uri`, sorted (S3 lists in key order; paginated for large prefixes)."""
    bucket, prefix = split_s3_uri(uri)
    keys = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys.extend(obj["Key"] for obj in page.get("Contents", []))
    return sorted(keys)


def download_prefix(s3: Any, uri: str, destination: Path, shard: tuple[int, int] = (0, 1)) -> dict[Path, str]:
    """Copy the objects under `uri` into `destination` keeping their paths below the prefix; returns each file
    written and the URI of the object it is a copy of.

    `shard=(i, n)` is host i's share of n under ShardedByS3Key. SageMaker documents only that each of n instances
    gets about 1/n of the objects (API_S3DataSource, S3DataDistributionType), not which ones: local mode deals the
    keys, in S3's listing order, round-robin (host i gets objects i, i + n, ...), so every object lands on exactly one
    host and the shares differ by at most one object.
    """
    bucket, prefix = split_s3_uri(uri)
    index, count = shard
    keys = [key for key in list_keys(s3, uri) if not key.endswith("/")][index::count]
    copies = {}
    for key in keys:
        relative = key[len(prefix):].lstrip("/") or Path(key).name
        target = destination / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        s3.download_file(bucket, key, str(target))
        copies[target] = f"s3://{bucket}/{key}"
    return copies


def upload_file(s3: Any, path: Path, uri: str) -> None:
    bucket, key = split_s3_uri(uri)
    s3.upload_file(str(path), bucket, key)
