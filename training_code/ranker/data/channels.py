"""Ranking data in memory: documents grouped into whole queries, read from LETOR text or binary shards.

A channel is a folder (or one file). Text files are SVMlight/LETOR rows `label [qid:Q] index:value ...`, grouped by
their `qid` column or, without one, by a group file beside them named like the data file plus `.query` (one line per
query: how many consecutive rows it has). Binary channels hold `.npy` shards written by `ranker.data.convert`.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import numpy as np

from ranker.data import host_cache, letor_parser, letor_processes, shards
from ranker.data.ranking_data import RankingData, concatenate

# A LETOR row starts with a numeric label, then an optional qid, then index:value pairs (or nothing).
_LETOR_ROW = re.compile(r"^\s*[-+]?[0-9.]+(\s+qid:\S+)?(\s+[0-9]+:\S+)*\s*(#.*)?$")
# Compressed files go to scikit-learn's reader, which opens them by these suffixes.
_COMPRESSED = (".gz", ".bz2")
_WHOLE_NUMBER = re.compile(r"[-+]?[0-9]+")  # what int() reads, as scikit-learn reads query ids and indices
_ROW_FORMAT = "each line must be `label [qid:Q] index:value ...` with 1-based indices, in increasing order"


class DataError(ValueError):
    """A channel file the user must fix: one line naming the file, the line and what is wrong with it, which the
    entry points print without a traceback."""


def split_queries(data: RankingData, fraction: float, seed: int) -> tuple[RankingData, RankingData]:
    """Holds out whole queries (never single documents) so validation measures unseen queries."""
    if data.num_queries < 2:
        raise ValueError(f"validation_fraction: cannot split {data.num_queries} query into train and validation; "
                         "give a validation channel or more queries")
    order = np.random.default_rng(seed).permutation(data.num_queries)
    held_out = min(max(1, round(data.num_queries * fraction)), data.num_queries - 1)
    return data.select_queries(np.sort(order[held_out:])), data.select_queries(np.sort(order[:held_out]))


def load_channel(path: Path, num_features: int | None = None, local_ranks: int = 1) -> RankingData:
    """Every data file in a channel, as one data set with `num_features` columns (default: from the data). With
    several `local_ranks` (processes on this host loading the same channel), text is parsed by one of them and
    memory-mapped by the others (ranker.data.host_cache)."""
    path = Path(path)
    started = time.perf_counter()
    if shards.is_shard_dir(path):
        loaded = shards.read_all(path, num_features)
        _log_ingest(path, loaded, started, text_bytes=0)
        return loaded
    files = letor_files(path)
    if not files:
        raise DataError(f"channel {path}: no LETOR text files or binary shards found; point the channel at a folder "
                        "holding rank.train (+ rank.train.query) or the output of ranker.data.convert")
    # A parse started ahead (`parse_ahead`) counts from its start.
    started = min([started, *filter(None, map(letor_processes.parsing_since, files))])
    loaded = host_cache.load_once(files, num_features, lambda: _read_letor_files(files, num_features)) \
        if local_ranks > 1 else _read_letor_files(files, num_features)
    _log_ingest(path, loaded, started, text_bytes=sum(file.stat().st_size for file in files))
    return loaded


def parse_ahead(path: Path) -> None:
    """Starts parsing the text channel's first file in worker processes (ranker.data.letor_processes.parse_ahead), for
    this process's `load_channel` of it, alone on its host, to collect; nothing for a shard folder or a file that
    the vectorised parser does not read. The channel's other files wait for `load_channel`, so no more parsed rows
    are held at once than without this."""
    path = Path(path)
    files = [] if shards.is_shard_dir(path) else letor_files(path)
    if files and _parsed_fast(files[0]):
        letor_processes.parse_ahead(files[0])


def letor_files(path: Path) -> list[Path]:
    """`path` itself when it is a file, else the LETOR text files in the folder (sorted by name); empty when there
    are none."""
    path = Path(path)
    if path.is_file():
        return [path]
    return sorted(p for p in path.iterdir() if is_letor_file(p)) if path.is_dir() else []


def _read_letor_files(files: list[Path], num_features: int | None) -> RankingData:
    parts = [read_letor_file(file, num_features) for file in files]
    widest = max(part.num_features for part in parts)
    return concatenate([widen(part, widest) for part in parts])


def _log_ingest(path: Path, loaded: RankingData, started: float, text_bytes: int) -> None:
    """One line per channel and process, which benchmarks.ranking.time_to_model reads to split a job's wall time."""
    seconds = time.perf_counter() - started
    source = f"{text_bytes / 1e6:,.1f} MB of text ({text_bytes / 1e6 / max(seconds, 1e-9):,.0f} MB/s)" \
        if text_bytes else "binary shards"
    print(f"ingest: {path}: {loaded.num_queries:,} queries, {len(loaded.labels):,} documents x "
          f"{loaded.num_features} features from {source} in {seconds:.2f}s", flush=True)


def widen(data: RankingData, num_features: int) -> RankingData:
    """`data` with zero columns added up to `num_features` (a feature absent from a file is 0 in every row)."""
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
    """One LETOR/SVMlight text file as whole queries; feature index 1 is column 0. Errors name the file and line."""
    path = Path(path)
    rows = read_letor_rows(path, num_features)
    grouping = query_grouping(path, rows)
    if grouping is None:
        group_file = path.with_name(path.name + ".query")
        raise DataError(f"{path}: no qid column and no group file {group_file.name}; add `qid:` to each row "
                        f"or write {group_file} with one query size per line")
    order, offsets = grouping
    labels = rows.labels.astype(np.float32)
    if order is None:  # rows already in query order: no copy of the features
        return RankingData(rows.features, labels, offsets)
    return RankingData(rows.features[order], labels[order], offsets)


def read_letor_rows(path: Path, num_features: int | None = None) -> letor_parser.ParsedRows:
    """One LETOR/SVMlight text file's rows in file order, whether or not they say which query they belong to.

    The rows are those scikit-learn's svmlight reader gives (the vectorised ranker.data.letor_parser reads them, and
    hands any file it cannot vouch for to scikit-learn, which then also words the error)."""
    path = Path(path)
    rows = _parse_fast(path, num_features)
    if rows is None:
        rows = _parse_with_scikit_learn(path, num_features)
    if rows.features.shape[0] == 0:
        raise DataError(f"{path}: no rows; the channel file is empty")
    _refuse_cut_off_last_row(path)
    return rows


def query_grouping(path: Path, rows: letor_parser.ParsedRows) -> tuple[np.ndarray | None, np.ndarray] | None:
    """How `path`'s rows form queries: the row order that puts each query's rows together (None when they already
    are) and the query offsets in that order, from the `qid:` column or the group file beside the data file; None
    when the file says neither."""
    group_file = Path(path).with_name(Path(path).name + ".query")
    if rows.qids is not None and rows.qids.any():
        return _groups_from_qids(rows.qids)
    if group_file.is_file():
        return None, _groups_from_file(group_file, len(rows.labels))
    return None


def _parse_fast(path: Path, num_features: int | None) -> letor_parser.ParsedRows | None:
    return letor_processes.parse_file(path, num_features) if _parsed_fast(path) else None


def _parsed_fast(path: Path) -> bool:
    """Whether the vectorised parser reads the file (scikit-learn reads compressed and empty ones)."""
    return path.suffix not in _COMPRESSED and path.stat().st_size > 0


def _parse_with_scikit_learn(path: Path, num_features: int | None) -> letor_parser.ParsedRows:
    # Imported here, not at the top: scikit-learn (with scipy) takes about a second to import, and only files the
    # vectorised parser hands back (compressed, or not valid LETOR) need it.
    from sklearn.datasets import load_svmlight_file

    try:
        features, labels, qids = load_svmlight_file(str(path), n_features=num_features, dtype=np.float32,
                                                    query_id=True, zero_based=False)
    except ValueError as error:
        bad = _first_bad_line(path)
        if bad is None:  # nothing this module can name: scikit-learn's words are all there are
            raise DataError(f"{path}: not LETOR text ({error}); {_ROW_FORMAT}") from error
        raise DataError(f"{path}:{bad[0]}: not a LETOR row: {bad[1]}; {_ROW_FORMAT}") from error
    if 0 < qids.size < features.shape[0]:
        raise DataError(f"{path}: {qids.size} of {features.shape[0]} rows have a qid: column; give every row "
                        "one, or none and a group file")
    if qids.size == 0:
        qids = None
    dense = features.toarray()
    bad_rows = np.flatnonzero(~np.isfinite(dense).all(axis=1) | ~np.isfinite(labels))
    if bad_rows.size:
        _refuse_cut_off_last_row(path)  # a cut-off file is the likelier cause: say that first
        raise DataError(f"{path}:{_line_of_row(path, int(bad_rows[0]))}: NaN or infinite value; "
                        "fix or drop that row")
    return letor_parser.ParsedRows(dense, labels, qids)


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
    raise DataError(f"{path}:{number}: the last row has no newline, so the file looks cut short (an interrupted "
                    "upload or copy); upload the complete file again, or end the row with a newline if it is whole")


def _groups_from_qids(qids: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
    """Rows of a query need not be adjacent: group them, queries in order of first appearance. The order is None
    when the rows already are grouped (the usual case), so the caller need not copy them."""
    boundaries = np.flatnonzero(qids[1:] != qids[:-1]) + 1
    run_qids = qids[np.concatenate([[0], boundaries])]
    if len(np.unique(run_qids)) == len(run_qids):  # each query's rows are one run: already in order
        return None, np.concatenate([[0], boundaries, [len(qids)]])
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
                raise DataError(f"{group_file}:{number}: query size {line.strip()!r} is not a positive integer")
            sizes.append(int(line))
    if sum(sizes) != num_rows:
        raise DataError(f"{group_file}: query sizes add up to {sum(sizes)} rows but the data file has {num_rows}; "
                        "the group file must list every query of its data file, in order")
    return np.concatenate([[0], np.cumsum(sizes)])


def _data_lines(path: Path):
    """(line number, text) of each row the svmlight parser reads: blank lines and comments are not rows."""
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            line = raw.decode("utf-8", errors="replace").split("#", 1)[0].strip()
            if line:
                yield number, line


def _first_bad_line(path: Path) -> tuple[int, str] | None:
    """The number of the first line that is not a LETOR row, and what is wrong with it; None when every line is one."""
    for number, line in _data_lines(path):
        problem = _row_problem(line)
        if problem is not None:
            return number, problem
    return None


def _row_problem(line: str) -> str | None:
    """What keeps one data line (its comment and surrounding blanks removed) from being a LETOR row, naming the token
    at fault, as scikit-learn's svmlight reader would refuse it; None when it is one."""
    label, *pairs = line.split()
    if not _is_float(label):
        return f"the label {label!r} is not a number"
    if pairs and pairs[0].startswith("qid:"):
        query = pairs.pop(0)
        if not _WHOLE_NUMBER.fullmatch(query[4:]):
            return f"the query id {query!r} is not a whole number"
    previous = 0
    for pair in pairs:
        index, colon, value = pair.partition(":")
        if not colon:
            return f"{pair!r} is not index:value"
        if not _WHOLE_NUMBER.fullmatch(index) or int(index) < 1:
            return f"the index of {pair!r} is not a whole number from 1"
        if not _is_float(value):
            return f"the value {value!r} of {pair!r} is not a number"
        if int(index) <= previous:
            return f"the index of {pair!r} comes after index {previous}"
        previous = int(index)
    return None


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
