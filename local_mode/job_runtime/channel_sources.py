"""Which S3 object each channel file of a local job is a copy of, and text that names the object instead.

Local mode downloads a job's channels into each host's folder, where SageMaker puts them under /opt/ml/input/data. A
script's message about such a file (a malformed row, a missing group file) would name a folder of local mode's own,
which means nothing to the user; the S3 object it came from, the user's upload, does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

# Where a path in a message ends: at a blank, a quote, a bracket or a comma, or at the colon before a line number.
_PATH_TAIL = r"[^\s:'\"(),]*"


class ChannelSources:
    """Each host's channel folders and files, by the S3 URI they were downloaded from."""

    def __init__(self) -> None:
        self._uris: dict[str, str] = {}
        self._roots: set[str] = set()
        self._pattern: re.Pattern[str] | None = None

    def add(self, channel_dir: Path, channel_uri: str, copies: Mapping[Path, str]) -> None:
        """A channel downloaded from `channel_uri` into `channel_dir`: `copies` maps each file to its object."""
        self._uris[str(channel_dir)] = channel_uri
        self._uris.update({str(path): uri for path, uri in copies.items()})
        self._roots.add(str(channel_dir.parent))
        self._pattern = None

    def named(self, text: str) -> str:
        """`text` with each channel folder or file path in it replaced by the URI it was downloaded from."""
        if not any(root in text for root in self._roots):
            return text
        if self._pattern is None:
            roots = "|".join(re.escape(root) for root in sorted(self._roots, key=len, reverse=True))
            self._pattern = re.compile(rf"(?:{roots})/{_PATH_TAIL}")
        return self._pattern.sub(lambda match: self._uris.get(match.group(0).rstrip("/"), match.group(0)), text)
