"""LETOR-like synthetic data of any size, for demos and benchmarks.

`python -m ranker.data.synthetic --output DIR --queries N [--docs-per-query M] [--features 136] [--seed S] [--qid]`
writes `rank.train` plus the group file `rank.train.query` (or, with `--qid`, a `qid:` column instead), so the folder
can be used as a training channel as is. Relevance comes from a hidden non-linear function of the features plus
noise, graded 0-4 within each query, so a model can learn it and NDCG tells how well it did.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from ranker.data.letor_parser import available_cores
from ranker.data.ranking_data import RankingData

# Share of a query's documents at each grade 0..4: most documents are irrelevant, few are perfect, as in LETOR.
_GRADE_QUANTILES = (0.55, 0.8, 0.92, 0.98)


# The hidden relevance function depends on the feature count only, so files written with different seeds (say a
# training and a validation channel) are samples of one ranking problem.
_FUNCTION_SEED = 20_240_601


def generate(num_queries: int, docs_per_query: int = 32, num_features: int = 136, seed: int = 0,
             varied_sizes: bool = False, zero_fraction: float = 0.0) -> RankingData:
    """`seed` draws the documents and the label noise; the relevance function is the same for every seed.
    `varied_sizes` draws each query's size uniformly from [docs_per_query / 2, 3 * docs_per_query / 2] (MSLR-WEB's
    queries vary); `zero_fraction` of the feature values are 0, which the text omits (sparse rows)."""
    function_rng = np.random.default_rng(_FUNCTION_SEED)
    hidden = 32
    projection = function_rng.normal(size=(num_features, hidden)) / np.sqrt(num_features)
    readout = function_rng.normal(size=hidden)
    rng = np.random.default_rng(seed)
    if varied_sizes:
        sizes = rng.integers(max(1, docs_per_query // 2), docs_per_query * 3 // 2 + 1, size=num_queries)
    else:
        sizes = np.full(num_queries, docs_per_query)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    num_docs = int(offsets[-1])
    # 4 decimals, as LETOR files print them; float32 of the decimal, which is what reading the text gives back.
    features = np.rint(rng.random((num_docs, num_features), dtype=np.float32) * 10_000) / 10_000
    if zero_fraction:
        features[rng.random((num_docs, num_features), dtype=np.float32) < zero_fraction] = 0
    features = features.astype(np.float32)
    relevance = np.tanh(features @ projection * 4 - 2 * projection.sum(axis=0)) @ readout
    relevance += rng.normal(scale=0.3 * relevance.std(), size=num_docs)
    labels = grades_within_queries(relevance, offsets)
    return RankingData(features, labels, offsets)


def grades_within_queries(relevance: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Grade 0-4 by each document's rank within its own query (`_GRADE_QUANTILES` of the query's documents)."""
    sizes = np.diff(offsets)
    query = np.repeat(np.arange(len(sizes)), sizes)
    order = np.lexsort((relevance, query))  # by query, then by relevance within it
    rank = np.empty(len(relevance), np.int64)
    rank[order] = np.arange(len(relevance)) - np.repeat(offsets[:-1], sizes)
    share_below = rank / np.repeat(np.maximum(sizes - 1, 1), sizes)
    return np.searchsorted(_GRADE_QUANTILES, share_below, side="left").astype(np.float32)


def write_letor(data: RankingData, folder: Path, with_qid: bool = False, name: str = "rank.train") -> Path:
    """LETOR text, written with numpy a block of documents at a time, the blocks formatted on every core (numpy
    releases the GIL for the work) and written in order: non-negative values with 4 decimals as `I.dddd` (as many
    integer digits as the largest value needs: raw counts), zeros left out, integer labels 0-9."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    query_ids = np.repeat(np.arange(1, data.num_queries + 1), np.diff(data.query_offsets))

    def block_text(first: int) -> bytes:
        rows = slice(first, first + _WRITE_BLOCK_DOCS)
        return _letor_lines(data.features[rows], data.labels[rows], query_ids[rows] if with_qid else None)

    blocks, threads = range(0, len(data.labels), _WRITE_BLOCK_DOCS), available_cores()
    with path.open("wb") as handle, ThreadPoolExecutor(threads) as pool:
        # A wave of blocks per thread count at a time: at most that many blocks' text is held before it is written.
        for wave in range(0, len(blocks), threads):
            handle.writelines(pool.map(block_text, blocks[wave:wave + threads]))
    if not with_qid:
        path.with_name(name + ".query").write_text("".join(f"{size}\n" for size in np.diff(data.query_offsets)))
    return path


_WRITE_BLOCK_DOCS = 20_000


def _letor_lines(features: np.ndarray, labels: np.ndarray, query_ids: np.ndarray | None) -> bytes:
    """Each row as a run of fixed-width byte cells plus a mask of the bytes that are text, joined in one compress."""
    if features.size and (features.min() < 0 or features.max() >= _LARGEST_VALUE):
        raise ValueError(f"write_letor: feature values must lie in [0, {_LARGEST_VALUE:.0e}) for the 4-decimal text "
                         f"format, got {features.min()} to {features.max()}")
    if labels.size and not (np.all(labels == np.rint(labels)) and labels.min() >= 0 and labels.max() <= 9):
        raise ValueError("write_letor: labels must be whole grades 0-9")
    num_docs, num_features = features.shape
    scaled = np.rint(features.astype(np.float64) * 10_000).astype(np.int64)
    integer_part = scaled // 10_000
    integer_width = len(str(int(integer_part.max(initial=0))))
    index_texts = [f" {column + 1}:".encode() for column in range(num_features)]
    value_at = np.array([len(text) for text in index_texts])
    value_width = integer_width + 5  # the integer digits, the point, 4 decimals
    cell_width = int(value_at.max()) + value_width
    cells = np.zeros((num_docs, num_features, cell_width), np.uint8)
    kept = np.zeros((num_docs, num_features, cell_width), bool)
    for column, text in enumerate(index_texts):
        cells[:, column, :len(text)] = np.frombuffer(text, np.uint8)
        kept[:, column, :len(text)] = True
    integer_powers = [10**power for power in range(integer_width - 1, -1, -1)]
    digits = ([integer_part // power % 10 for power in integer_powers] + [np.full_like(scaled, -2)]
              + [scaled // 10**power % 10 for power in (3, 2, 1, 0)])
    # Leading zeros of the integer part are left out; its last digit always stays (`0.5`).
    significant = [(integer_part >= power) | (power == 1) for power in integer_powers] + [True] * 5
    for start in np.unique(value_at):
        columns = value_at == start
        for offset, (digit, shown) in enumerate(zip(digits, significant)):
            cells[:, columns, start + offset] = digit[:, columns] + ord("0")  # -2 + "0" is the point
            kept[:, columns, start + offset] = shown if shown is True else shown[:, columns]
    kept &= (scaled > 0)[:, :, None]
    prefix, prefix_kept = _row_prefixes(labels, query_ids)
    newline = np.full((num_docs, 1), ord("\n"), np.uint8)
    text = np.concatenate([prefix, cells.reshape(num_docs, -1), newline], axis=1)
    mask = np.concatenate([prefix_kept, kept.reshape(num_docs, -1), np.ones((num_docs, 1), bool)], axis=1)
    return text[mask].tobytes()


# Integer digits the writer gives a value at most (int64 holds the value times 10**4 exactly well beyond this).
_LARGEST_VALUE = 1e9


def _row_prefixes(labels: np.ndarray, query_ids: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """`label` or `label qid:Q` per row, right-aligned digits in a fixed width, with the mask of their bytes."""
    columns = [labels.astype(np.int64)[:, None] + ord("0")]
    kept = [np.ones((len(labels), 1), bool)]
    if query_ids is not None:
        width = len(str(int(query_ids.max(initial=0))))
        powers = 10 ** np.arange(width - 1, -1, -1)
        digit_columns = query_ids[:, None] // powers % 10
        significant = (query_ids[:, None] >= powers) | (powers == 1)
        columns += [np.broadcast_to(np.frombuffer(b" qid:", np.uint8), (len(labels), 5)), digit_columns + ord("0")]
        kept += [np.ones((len(labels), 5), bool), significant]
    return np.concatenate(columns, axis=1).astype(np.uint8), np.concatenate(kept, axis=1)


def generator_parser(description: str, docs_per_query: int) -> argparse.ArgumentParser:
    """The flags every synthetic-data command takes: where, how many queries of how many documents and features,
    which seed."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", type=Path, required=True, help="folder to write the files into")
    parser.add_argument("--queries", type=int, required=True, help="number of queries")
    parser.add_argument("--docs-per-query", type=int, default=docs_per_query, help="documents per query")
    parser.add_argument("--features", type=int, default=136, help="features per document (MSLR-WEB uses 136)")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed for the documents and label noise (the relevance function is fixed)")
    return parser


def write_named_file(description: str, generate: Callable[..., RankingData], kind: str,
                     argv: Sequence[str] | None) -> None:
    """A generator's command that writes one file with a `qid:` column, named by `--name` (rank.test for a test
    channel): `generate(queries, docs_per_query, features, seed)` of `kind` data."""
    parser = generator_parser(description, docs_per_query=120)
    parser.add_argument("--name", default="rank.train", help="file name (rank.test for a test channel)")
    args = parser.parse_args(argv)
    path = write_letor(generate(args.queries, args.docs_per_query, args.features, args.seed), args.output,
                       with_qid=True, name=args.name)
    print(f"wrote {args.queries} queries of {kind} data ({args.features} features) to {path}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = generator_parser(__doc__, docs_per_query=32)
    parser.add_argument("--qid", action="store_true", help="write a qid: column instead of a .query group file")
    parser.add_argument("--varied-sizes", action="store_true",
                        help="draw query sizes from [docs/2, 3*docs/2] instead of all equal (MSLR-WEB's vary)")
    parser.add_argument("--zero-fraction", type=float, default=0.0,
                        help="share of feature values that are 0 and left out of the text (sparse rows)")
    args = parser.parse_args(argv)
    generated = generate(args.queries, args.docs_per_query, args.features, args.seed, args.varied_sizes,
                         args.zero_fraction)
    path = write_letor(generated, args.output, args.qid)
    print(f"wrote {args.queries} queries x {args.docs_per_query} documents x {args.features} features to {path}")


if __name__ == "__main__":
    main()
