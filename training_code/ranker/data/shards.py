"""Binary shards: `.npy` arrays that open memory-mapped, so reading one costs no parsing and no copy.

A shard folder holds `manifest.json` and, per shard, `NAME.features.npy` (float32 `[docs, features]`),
`NAME.labels.npy` (float32 `[docs]`) and `NAME.offsets.npy` (int64 `[queries + 1]`). Each shard holds whole
queries, so ranks can read disjoint shards without splitting a query.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from ranker.data.ranking_data import RankingData, concatenate

MANIFEST = "manifest.json"
FORMAT_VERSION = 1


def is_shard_dir(path: Path) -> bool:
    return (Path(path) / MANIFEST).is_file()


def read_manifest(folder: Path) -> dict:
    manifest = json.loads((Path(folder) / MANIFEST).read_text())
    if manifest.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{folder / MANIFEST}: format_version {manifest.get('format_version')!r} is not "
                         f"{FORMAT_VERSION}; rewrite the shards with this version's ranker.data.convert")
    return manifest


def open_shard(folder: Path, name: str) -> RankingData:
    """One shard as ranking data whose features and labels stay on disk (memory-mapped)."""
    folder = Path(folder)
    # Plain ndarray views of the maps: slicing an np.memmap builds a memmap object per slice, about half the
    # loader's time per batch; the view reads the same pages without that overhead.
    return RankingData(np.load(folder / f"{name}.features.npy", mmap_mode="r").view(np.ndarray),
                       np.load(folder / f"{name}.labels.npy", mmap_mode="r").view(np.ndarray),
                       np.load(folder / f"{name}.offsets.npy"))


def write_shards(data: RankingData, folder: Path, docs_per_shard: int = 1_000_000) -> list[str]:
    """Splits at query boundaries into shards of about `docs_per_shard` documents each."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    names, start_query = [], 0
    offsets = data.query_offsets
    while start_query < data.num_queries:
        end_query = int(np.searchsorted(offsets, offsets[start_query] + docs_per_shard, side="right")) - 1
        end_query = max(end_query, start_query + 1)
        rows = slice(int(offsets[start_query]), int(offsets[end_query]))
        name = f"shard-{len(names):05d}"
        np.save(folder / f"{name}.features.npy", np.ascontiguousarray(data.features[rows], dtype=np.float32))
        np.save(folder / f"{name}.labels.npy", np.ascontiguousarray(data.labels[rows], dtype=np.float32))
        query_offsets = offsets[start_query:end_query + 1] - offsets[start_query]
        np.save(folder / f"{name}.offsets.npy", query_offsets.astype(np.int64))
        names.append(name)
        start_query = end_query
    manifest = {"format_version": FORMAT_VERSION, "num_features": data.num_features, "max_docs": data.max_docs,
                "num_queries": data.num_queries, "num_docs": int(offsets[-1]), "shards": names}
    temporary = folder / f".{MANIFEST}.tmp"
    temporary.write_text(json.dumps(manifest, indent=2))
    os.replace(temporary, folder / MANIFEST)  # the manifest appears last, so a half-written folder is never read
    return names


def read_all(folder: Path, num_features: int | None = None) -> RankingData:
    manifest = read_manifest(folder)
    if num_features and num_features < manifest["num_features"]:
        raise ValueError(f"num_features: {num_features} is fewer than the {manifest['num_features']} columns of "
                         f"the shards in {folder}; drop the flag or raise it")
    parts = []
    for name in manifest["shards"]:
        shard = open_shard(folder, name)
        features = np.zeros((len(shard.labels), num_features or manifest["num_features"]), dtype=np.float32)
        features[:, : shard.features.shape[1]] = shard.features
        parts.append(RankingData(features, np.asarray(shard.labels), shard.query_offsets))
    return concatenate(parts)


def sample_rows(folder: Path, rows: int, seed: int, num_features: int | None = None) -> np.ndarray:
    """About `rows` documents' features drawn evenly from all shards (each shard's share of its documents, chosen
    with `seed`), read from the memory maps without loading the shards."""
    manifest = read_manifest(folder)
    share = min(1.0, rows / max(manifest["num_docs"], 1))
    rng = np.random.default_rng(seed)
    parts = []
    for name in manifest["shards"]:
        shard = open_shard(folder, name)
        count = len(shard.labels)
        chosen = np.sort(rng.choice(count, size=min(count, max(1, round(count * share))), replace=False))
        features = np.zeros((len(chosen), num_features or manifest["num_features"]), dtype=np.float32)
        features[:, : shard.features.shape[1]] = shard.features[chosen]
        parts.append(features)
    return np.concatenate(parts)
