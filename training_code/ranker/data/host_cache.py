"""A text channel parsed once per host: the first local rank to come parses it and writes it as binary shards into
a host-local cache; the other local ranks on the host wait for that and memory-map the shards instead of parsing
the same text again (which would split the host's cores among several parses of one file).

A file lock orders the ranks, so no rank needs to know which one it is, and a rank whose parse fails releases the
lock for the next one, which then reports the same error itself. The cache key is each file's (and group file's)
path, size and modification time and the column count, so a changed file is parsed again. The cache lives in the
temporary folder (`RANKER_CACHE_DIR` overrides it): local to the host, gone with a SageMaker training container.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ranker.data import shards
from ranker.data.ranking_data import RankingData

CACHE_DIR_VARIABLE = "RANKER_CACHE_DIR"
# How long a rank waits for another to finish parsing: enough for tens of GB of text at the parser's rates.
LOCK_TIMEOUT_S = 1800.0
_POLL_S = 0.1


def load_once(files: Sequence[Path], num_features: int | None, build: Callable[[], RankingData]) -> RankingData:
    """`build()`'s data for these text files, built by one rank per host and memory-mapped by the others."""
    folder = _cache_root() / _key(files, num_features)
    folder.parent.mkdir(parents=True, exist_ok=True)
    with _locked(folder.with_name(folder.name + ".lock"), files):
        if shards.is_shard_dir(folder):
            return _open(folder)
        loaded = build()
        shards.write_shards(loaded, folder, docs_per_shard=max(len(loaded.labels), 1))
        return loaded


def _cache_root() -> Path:
    return Path(os.environ.get(CACHE_DIR_VARIABLE) or Path(tempfile.gettempdir()) / "ranker-letor-cache")


def _key(files: Sequence[Path], num_features: int | None) -> str:
    """Names the data files' (and their group files') versions and the column count."""
    group_files = [group for file in files if (group := Path(file).with_name(Path(file).name + ".query")).is_file()]
    described = [(str(Path(file).resolve()), Path(file).stat().st_size, Path(file).stat().st_mtime_ns)
                 for file in [*files, *group_files]]
    text = json.dumps({"files": described, "num_features": num_features, "format": shards.FORMAT_VERSION})
    return f"{Path(files[0]).name}-{hashlib.sha256(text.encode()).hexdigest()[:16]}"


def _open(folder: Path) -> RankingData:
    """The cached shard (one per channel), memory-mapped: the page cache holds one copy for all local ranks."""
    (name,) = shards.read_manifest(folder)["shards"]
    return shards.open_shard(folder, name)


class _locked:
    """An exclusive lock on `path`, waited for up to LOCK_TIMEOUT_S."""

    def __init__(self, path: Path, files: Sequence[Path]):
        self.path, self.files = path, files

    def __enter__(self) -> None:
        self.handle = self.path.open("a")
        deadline = time.monotonic() + LOCK_TIMEOUT_S
        while True:
            try:
                fcntl.flock(self.handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    self.handle.close()
                    raise TimeoutError(
                        f"{self.path}: waited {LOCK_TIMEOUT_S:.0f}s for another rank on this host to parse "
                        f"{', '.join(map(str, self.files))}; that rank is stuck or the text is larger than this "
                        "wait allows: convert it to shards first (python -m ranker.data.convert)") from None
                time.sleep(_POLL_S)

    def __exit__(self, *exc_info) -> None:
        fcntl.flock(self.handle, fcntl.LOCK_UN)
        self.handle.close()
