"""CheckpointConfig: the local checkpoint folder mirrors the job's checkpoint S3 URI, both ways.

At start the S3 content is pulled into every host's folder (so a restarted job resumes); while the job runs
and at the end, new or changed files are pushed, as the service syncs /opt/ml/checkpoints.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from local_mode.aws.s3_transfer import download_prefix, join_s3_uri, upload_file


class CheckpointSync:
    def __init__(self, s3: Any, uri: str, folders: list[Path]) -> None:
        self._s3 = s3
        self._uri = uri
        self._folders = folders
        self._uploaded: dict[Path, tuple[int, int]] = {}

    def pull(self) -> int:
        """Copy the checkpoints already in S3 into every host folder; returns how many objects each host got."""
        count = 0
        for folder in self._folders:
            count = len(download_prefix(self._s3, self._uri, folder))
            self._uploaded.update({path: _fingerprint(path) for path in folder.rglob("*") if path.is_file()})
        return count

    def push(self) -> int:
        """Upload the files that are new or changed since the last push; returns how many went up."""
        pushed = 0
        for folder in self._folders:
            for path in sorted(folder.rglob("*")):
                if not path.is_file():
                    continue
                fingerprint = _fingerprint(path)
                if self._uploaded.get(path) == fingerprint:
                    continue
                upload_file(self._s3, path, join_s3_uri(self._uri, path.relative_to(folder).as_posix()))
                self._uploaded[path] = fingerprint
                pushed += 1
        return pushed


def _fingerprint(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_mtime_ns, stat.st_size
