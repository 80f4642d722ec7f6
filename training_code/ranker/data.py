"""Ranking data in memory: documents grouped into whole queries, read from LETOR text or binary shards.

A channel is a folder (or one file). Text files are SVMlight/LETOR rows `label [qid:Q] index:value ...`, grouped by
their `qid` column or, without one, by a group file beside them named like the data file plus `.query` (one line per
query: how many consecutive rows it has). Binary channels hold `.npy` shards written by `ranker.convert`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sklearn.datasets import load_svmlight_file

from ranker import shards

# A LETOR row starts with a numeric label, then an optional qid, then index:value pairs (or nothing).
_LETOR_ROW = re.compile(r"^\s*[-+]?[0-9.]+(\s+qid:\S+)?(\s+[0-9]+:\S+)*\s*(#.*)?$")


@dataclass(frozen=True)
class RankingData:
    """Documents as dense float32 rows; query `q` owns rows `query_offsets[q]:query_offsets[q + 1]`."""

    features: np.ndarray
    labels: np.ndarray
    query_offsets: np.ndarray

    @property
    def num_queries(self) -> int:
        return len(self.query_offsets) - 1

    @property
    def num_features(self) -> int:
        return self.features.shape[1]

    @property
    def max_docs(self) -> int:
        return int(np.diff(self.query_offsets).max(initial=0))

    def select_queries(self, query_indices: np.ndarray) -> RankingData:
        sizes = np.diff(self.query_offsets)[query_indices]
        rows = np.concatenate([np.arange(self.query_offsets[q], self.query_offsets[q + 1]) for q in query_indices])
        return RankingData(self.features[rows], self.labels[rows], np.concatenate([[0], np.cumsum(sizes)]))

    def padded(self, max_docs: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`[queries, max_docs, features]` features, `[queries, max_docs]` labels and mask, so per-query
        losses and metrics vectorise; padded slots are zero and masked out."""
        max_docs = max_docs or self.max_docs
        sizes = np.diff(self.query_offsets)
        mask = np.arange(max_docs)[None, :] < sizes[:, None]
        features = np.zeros((self.num_queries, max_docs, self.num_features), dtype=np.float32)
        labels = np.zeros((self.num_queries, max_docs), dtype=np.float32)
        features[mask] = self.features
        labels[mask] = self.labels
        return features, labels, mask

    def with_log1p(self) -> RankingData:
        return RankingData(np.log1p(np.maximum(self.features, 0)), self.labels, self.query_offsets)


def concatenate(parts: list[RankingData]) -> RankingData:
    offsets = [parts[0].query_offsets]
    for part in parts[1:]:
        offsets.append(part.query_offsets[1:] + offsets[-1][-1])
    return RankingData(np.concatenate([p.features for p in parts]), np.concatenate([p.labels for p in parts]),
                       np.concatenate(offsets))


def split_queries(data: RankingData, fraction: float, seed: int) -> tuple[RankingData, RankingData]:
    """Holds out whole queries (never single documents) so validation measures unseen queries."""
    if data.num_queries < 2:
        raise ValueError(f"validation_fraction: cannot split {data.num_queries} query into train and validation; "
                         "give a validation channel or more queries")
    order = np.random.default_rng(seed).permutation(data.num_queries)
    held_out = min(max(1, round(data.num_queries * fraction)), data.num_queries - 1)
    return data.select_queries(np.sort(order[held_out:])), data.select_queries(np.sort(order[:held_out]))


def load_channel(path: Path, num_features: int | None = None) -> RankingData:
    """Every data file in a channel, as one data set with `num_features` columns (default: from the data)."""
    path = Path(path)
    if shards.is_shard_dir(path):
        return shards.read_all(path, num_features)
    files = [path] if path.is_file() else sorted(p for p in path.iterdir() if is_letor_file(p)) if path.is_dir() else []
    if not files:
        raise ValueError(f"channel {path}: no LETOR text files or binary shards found; point the channel at a folder "
                         "holding rank.train (+ rank.train.query) or the output of ranker.convert")
    parts = [read_letor_file(file, num_features) for file in files]
    widest = max(part.num_features for part in parts)
    return concatenate([_widen(part, widest) for part in parts])


def _widen(data: RankingData, num_features: int) -> RankingData:
    if data.num_features == num_features:
        return data
    features = np.zeros((len(data.labels), num_features), dtype=np.float32)
    features[:, : data.num_features] = data.features
    return RankingData(features, data.labels, data.query_offsets)


def is_letor_file(path: Path) -> bool:
    """Sniffs the first data row, so READMEs, licences and group files in a channel are skipped."""
    if not path.is_file() or path.name.startswith(".") or path.suffix == ".query":
        return False
    with path.open("rb") as handle:
        for raw in handle:
            line = raw.decode("utf-8", errors="replace").strip()
            if line and not line.startswith("#"):
                return bool(_LETOR_ROW.match(line))
    return False


def read_letor_file(path: Path, num_features: int | None = None) -> RankingData:
    """One LETOR/SVMlight text file; feature index 1 is column 0. Errors name the file and line."""
    try:
        features, labels, qids = load_svmlight_file(str(path), n_features=num_features, dtype=np.float32,
                                                    query_id=True, zero_based=False)
    except ValueError as error:
        line = _first_bad_line(path)
        raise ValueError(f"{path}:{line}: not a LETOR row ({error}); each line must be "
                         "`label [qid:Q] index:value ...` with 1-based indices") from error
    if features.shape[0] == 0:
        raise ValueError(f"{path}: no rows; the channel file is empty")
    _refuse_cut_off_last_row(path)
    dense = features.toarray()
    bad_rows = np.flatnonzero(~np.isfinite(dense).all(axis=1) | ~np.isfinite(labels))
    if bad_rows.size:
        raise ValueError(f"{path}:{_line_of_row(path, int(bad_rows[0]))}: NaN or infinite value; "
                         "fix or drop that row")
    group_file = path.with_name(path.name + ".query")
    if qids.any():
        order, offsets = _groups_from_qids(qids)
    elif group_file.is_file():
        order, offsets = np.arange(len(labels)), _groups_from_file(group_file, len(labels))
    else:
        raise ValueError(f"{path}: no qid column and no group file {group_file.name}; add `qid:` to each row "
                         f"or write {group_file} with one query size per line")
    return RankingData(dense[order], labels[order].astype(np.float32), offsets)


def _refuse_cut_off_last_row(path: Path) -> None:
    """A copy or upload cut short usually ends mid-number, which still parses (`3:0.66` of `3:0.6627`) and, with a
    `qid:` column, leaves no other trace. Every LETOR writer ends its rows with a newline, so a last data row
    without one is taken as cut off."""
    with path.open("rb") as handle:
        handle.seek(0, os.SEEK_END)
        if handle.tell() == 0:
            return
        handle.seek(-1, os.SEEK_END)
        if handle.read(1) == b"\n":
            return
    content = path.read_bytes()
    last_line = content.rsplit(b"\n", 1)[-1].decode("utf-8", errors="replace")
    if not last_line.split("#", 1)[0].strip():
        return  # a final comment or blank line: no row was cut
    number = content.count(b"\n") + 1
    raise ValueError(f"{path}:{number}: the last row has no newline, so the file looks cut short (an interrupted "
                     "upload or copy); upload the complete file again, or end the row with a newline if it is whole")


def _groups_from_qids(qids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of a query need not be adjacent: group them, queries in order of first appearance."""
    _, first_seen, inverse = np.unique(qids, return_index=True, return_inverse=True)
    query_rank = np.argsort(np.argsort(first_seen))[inverse]
    order = np.argsort(query_rank, kind="stable")
    sizes = np.bincount(query_rank)
    return order, np.concatenate([[0], np.cumsum(sizes)])


def _groups_from_file(group_file: Path, num_rows: int) -> np.ndarray:
    sizes = []
    for number, line in enumerate(group_file.read_text().splitlines(), start=1):
        if line.strip():
            if not line.strip().isdigit() or int(line) == 0:
                raise ValueError(f"{group_file}:{number}: query size {line.strip()!r} is not a positive integer")
            sizes.append(int(line))
    if sum(sizes) != num_rows:
        raise ValueError(f"{group_file}: query sizes add up to {sum(sizes)} rows but the data file has {num_rows}; "
                         "the group file must list every query of its data file, in order")
    return np.concatenate([[0], np.cumsum(sizes)])


def _data_lines(path: Path):
    """(line number, text) of each row the svmlight parser reads: blank lines and comments are not rows."""
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            line = raw.decode("utf-8", errors="replace").split("#", 1)[0].strip()
            if line:
                yield number, line


def _first_bad_line(path: Path) -> int:
    for number, line in _data_lines(path):
        if not _LETOR_ROW.match(line) or any(not _is_float(token.split(":", 1)[1]) for token in line.split()[1:]):
            return number
    return 0


def _line_of_row(path: Path, row: int) -> int:
    for index, (number, _) in enumerate(_data_lines(path)):
        if index == row:
            return number
    return 0


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
