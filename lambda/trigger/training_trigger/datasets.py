"""Dataset versions in the data bucket: `<prefix><name>/<version>/<channel>/...`, marker at the version root."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from training_trigger.aws_clients import s3_client
from training_trigger.errors import InvalidInput

MANIFEST_NAME = "manifest.json"


@dataclass(frozen=True)
class DatasetVersion:
    dataset: str
    version: str
    marker_key: str
    marker_etag: str
    marker_modified: dt.datetime
    channels: tuple[str, ...]  # the prefixes found under the version root
    files: tuple[str, ...]  # object names at the version root (markers, manifest)


class DatasetCatalog:
    """Reads dataset versions through S3 listings; the trigger's role allows ListBucket and GetObject only."""

    def __init__(self, bucket: str, prefix: str, marker_names: tuple[str, ...], client: Any = None):
        self.bucket, self.prefix, self.marker_names = bucket, prefix, marker_names
        self._client = client

    @property
    def client(self) -> Any:
        return self._client or s3_client()

    def uri(self, dataset: str, version: str, channel: str = "") -> str:
        path = f"{self.prefix}{dataset}/{version}/" + (f"{channel}/" if channel else "")
        return f"s3://{self.bucket}/{path}"

    def dataset_of(self, uri: str) -> str | None:
        """The dataset a channel URI lies in (`uri`'s inverse), or None outside the bucket's dataset prefix."""
        root = f"s3://{self.bucket}/{self.prefix}"
        return (uri[len(root):].split("/", 1)[0] or None) if uri.startswith(root) else None

    def version(self, dataset: str, version: str) -> DatasetVersion | None:
        """The version with its channels, or None while no marker closes it (still being written)."""
        root = f"{self.prefix}{dataset}/{version}/"
        files, channels = {}, []
        for page in self._pages(root):
            files.update({item["Key"][len(root):]: item for item in page.get("Contents", [])})
            channels += [common["Prefix"][len(root):].rstrip("/") for common in page.get("CommonPrefixes", [])]
        marker = next((files[name] for name in self.marker_names if name in files), None)
        if marker is None:
            return None
        return DatasetVersion(dataset=dataset, version=version, marker_key=marker["Key"],
                              marker_etag=marker["ETag"].strip('"'), marker_modified=marker["LastModified"],
                              channels=tuple(sorted(channels)), files=tuple(sorted(files)))

    def newest_complete_version(self, dataset: str | None = None) -> DatasetVersion | None:
        """The version whose marker was written last, in one dataset or across all of them."""
        datasets = [dataset] if dataset else list(self._children(self.prefix))
        complete = [found for name in datasets for version in self._children(f"{self.prefix}{name}/")
                    if (found := self.version(name, version)) is not None]
        return max(complete, key=lambda found: (found.marker_modified, found.version), default=None)

    def manifest(self, found: DatasetVersion) -> dict[str, Any]:
        """The version's manifest.json as an object, or {} when the version has none."""
        if MANIFEST_NAME not in found.files:
            return {}
        key = f"{self.prefix}{found.dataset}/{found.version}/{MANIFEST_NAME}"
        body = self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        try:
            manifest = json.loads(body)
        except ValueError as error:
            raise InvalidInput([f"s3://{self.bucket}/{key} is not valid JSON ({error}): rewrite it as a JSON "
                                f"object"]) from error
        if not isinstance(manifest, dict):
            raise InvalidInput([f"s3://{self.bucket}/{key} holds {type(manifest).__name__}, not an object: "
                                f"write a JSON object such as {{\"training\": {{\"instance_count\": 2}}}}"])
        return manifest

    def _children(self, prefix: str) -> Iterator[str]:
        for page in self._pages(prefix):
            for common in page.get("CommonPrefixes", []):
                yield common["Prefix"][len(prefix):].rstrip("/")

    def _pages(self, prefix: str) -> Iterator[dict[str, Any]]:
        paginator = self.client.get_paginator("list_objects_v2")
        yield from paginator.paginate(Bucket=self.bucket, Prefix=prefix, Delimiter="/")
