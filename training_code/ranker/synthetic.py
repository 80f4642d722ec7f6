"""LETOR-like synthetic data of any size, for demos and benchmarks.

`python -m ranker.synthetic --output DIR --queries N [--docs-per-query M] [--features 136] [--seed S] [--qid]`
writes `rank.train` plus the group file `rank.train.query` (or, with `--qid`, a `qid:` column instead), so the folder
can be used as a training channel as is. Relevance comes from a hidden non-linear function of the features plus
noise, graded 0-4 within each query, so a model can learn it and NDCG tells how well it did.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from sklearn.datasets import dump_svmlight_file

from ranker.ranking_data import RankingData

# Share of a query's documents at each grade 0..4: most documents are irrelevant, few are perfect, as in LETOR.
_GRADE_QUANTILES = (0.55, 0.8, 0.92, 0.98)


# The hidden relevance function depends on the feature count only, so files written with different seeds (say a
# training and a validation channel) are samples of one ranking problem.
_FUNCTION_SEED = 20_240_601


def generate(num_queries: int, docs_per_query: int = 32, num_features: int = 136, seed: int = 0) -> RankingData:
    """`seed` draws the documents and the label noise; the relevance function is the same for every seed."""
    function_rng = np.random.default_rng(_FUNCTION_SEED)
    hidden = 32
    projection = function_rng.normal(size=(num_features, hidden)) / np.sqrt(num_features)
    readout = function_rng.normal(size=hidden)
    rng = np.random.default_rng(seed)
    num_docs = num_queries * docs_per_query
    features = rng.random((num_docs, num_features), dtype=np.float32)
    relevance = np.tanh(features @ projection * 4 - 2 * projection.sum(axis=0)) @ readout
    relevance += rng.normal(scale=0.3 * relevance.std(), size=num_docs)
    per_query = relevance.reshape(num_queries, docs_per_query)
    cut_points = np.quantile(per_query, _GRADE_QUANTILES, axis=1).T
    labels = (per_query[:, :, None] > cut_points[:, None, :]).sum(axis=2).astype(np.float32).reshape(-1)
    offsets = np.arange(num_queries + 1, dtype=np.int64) * docs_per_query
    return RankingData(np.round(features, 4), labels, offsets)


def write_letor(data: RankingData, folder: Path, with_qid: bool = False, name: str = "rank.train") -> Path:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    query_ids = np.repeat(np.arange(1, data.num_queries + 1), np.diff(data.query_offsets))
    # Rounded to 4 places in float64, most values print short (`0.8506`, like real LETOR files); float32 values
    # would all print as `0.850600004196167`, doubling the file.
    features = np.round(data.features.astype(np.float64), 4)
    dump_svmlight_file(features, data.labels.astype(int), str(path), zero_based=False,
                       query_id=query_ids if with_qid else None)
    if not with_qid:
        path.with_name(name + ".query").write_text("".join(f"{size}\n" for size in np.diff(data.query_offsets)))
    return path


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", type=Path, required=True, help="folder to write rank.train (+ .query) into")
    parser.add_argument("--queries", type=int, required=True, help="number of queries")
    parser.add_argument("--docs-per-query", type=int, default=32, help="documents per query")
    parser.add_argument("--features", type=int, default=136, help="features per document (MSLR-WEB uses 136)")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed for the documents and label noise (the relevance function is fixed)")
    parser.add_argument("--qid", action="store_true", help="write a qid: column instead of a .query group file")
    args = parser.parse_args(argv)
    path = write_letor(generate(args.queries, args.docs_per_query, args.features, args.seed), args.output, args.qid)
    print(f"wrote {args.queries} queries x {args.docs_per_query} documents x {args.features} features to {path}")


if __name__ == "__main__":
    main()
