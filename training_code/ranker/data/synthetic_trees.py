"""Tree-shaped synthetic ranking data: relevance is a sum of many small axis-aligned trees, where gradient-boosted
trees are strong, for benchmarks against them.

`python -m ranker.data.synthetic_trees --output DIR --queries N [--docs-per-query 120] [--features 136] [--seed S]`
writes `rank.train` with a `qid:` column (LETOR text, ranker.data.synthetic.write_letor), usable as a channel as is.

The features are heavy-tailed (lognormal, some zero), uniform in [0, 1] (4 decimals) and binary. Relevance is the sum
of `_TREES` full binary trees of depth 2 to 4 over `_INFORMATIVE` of the features (the others carry nothing), each
node a threshold on one feature at one of its quantiles, drawn towards both tails, each leaf a value drawn once:
thousands of axis-aligned cells and their interactions, which a booster of many trees approximates round after round.
Gaussian noise is added to it, and each query's documents are graded 0-4 by their rank within it (ranker.data.synthetic's
shares: most irrelevant, few perfect). Query sizes are MSLR-like (ranker.data.synthetic_search). What LightGBM and the
entry points make of it at the benchmark's two sizes: docs/benchmarks.md, defaults sized for the hardware.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ranker.data.ranking_data import RankingData
from ranker.data.synthetic import grades_within_queries, write_named_file
from ranker.data.synthetic_search import drawn_queries

# The ranking problem (feature distributions, trees) depends on the feature count only, so files written with
# different seeds (training and test channels) are samples of one problem.
_PROBLEM_SEED = 20_261_204
_HEAVY_SHARE, _BINARY_SHARE = 0.4, 0.2
_TREES = 300
_INFORMATIVE = 24
"""Features the trees split on; the others are drawn alike and carry nothing (trees ignore such features, an MLP
must learn to)."""
_DEPTHS = (2, 3, 4)
_RELEVANCE_NOISE = 0.1
"""Standard deviation of the noise added to the trees' relevance, in units of the relevance's own."""
_LEVEL_LOW, _LEVEL_HIGH, _LEVEL_SHAPE = 0.01, 0.99, 0.5
"""A threshold's quantile: `_LEVEL_LOW` plus a Beta(`_LEVEL_SHAPE`, `_LEVEL_SHAPE`) share of the range up to
`_LEVEL_HIGH`, most of them near either end: a rare high count, a rare low score, where an encoding of quantile bins
is coarsest."""
_REFERENCE_DOCS = 100_000
"""Documents drawn once to place the trees' thresholds at quantiles of each feature."""


@dataclass(frozen=True)
class _Tree:
    """A full binary tree in breadth-first order: node `n`'s children are `2n + 1` (at or below its threshold) and
    `2n + 2`; the last `len(leaves)` nodes are leaves."""

    features: np.ndarray
    thresholds: np.ndarray
    leaves: np.ndarray

    @property
    def depth(self) -> int:
        return int(np.log2(len(self.leaves)))

    def __call__(self, columns: np.ndarray) -> np.ndarray:
        """Each document's leaf value; `columns` holds the features as rows (`[features, documents]`), so that the
        documents at one node read neighbouring values of its feature (twice as fast as reading across rows)."""
        documents = np.arange(columns.shape[1])
        node = np.zeros(len(documents), np.int64)
        for _ in range(self.depth):
            node = 2 * node + 1 + (columns[self.features[node], documents] > self.thresholds[node])
        return self.leaves[node - (len(self.leaves) - 1)]


@dataclass(frozen=True)
class _Problem:
    """The fixed parts: how each feature is drawn and the trees."""

    heavy_log_mean: np.ndarray
    heavy_log_scale: np.ndarray
    heavy_zero_share: np.ndarray
    binary_share: np.ndarray
    num_uniform: int
    trees: tuple[_Tree, ...] = ()

    def features(self, rng: np.random.Generator, num_docs: int) -> np.ndarray:
        """Heavy-tailed values (4 decimals, some zero), then uniform ones (4 decimals), then binary flags; float32, as
        reading the written text gives them back."""
        heavy = np.exp(rng.normal(self.heavy_log_mean, self.heavy_log_scale, (num_docs, len(self.heavy_log_mean))))
        heavy[rng.random(heavy.shape) < self.heavy_zero_share] = 0
        uniform = rng.random((num_docs, self.num_uniform))
        binary = rng.random((num_docs, len(self.binary_share))) < self.binary_share
        # The writer's 4-decimal text holds values below 1e9.
        values = np.concatenate([np.minimum(heavy, 1e8), uniform, binary], axis=1)
        return (np.rint(values * 10_000) / 10_000).astype(np.float32)

    def relevance(self, features: np.ndarray) -> np.ndarray:
        columns = np.ascontiguousarray(features.T)
        return sum((tree(columns) for tree in self.trees), np.zeros(len(features)))


def _problem(num_features: int) -> _Problem:
    rng = np.random.default_rng(_PROBLEM_SEED)
    heavy, binary = round(num_features * _HEAVY_SHARE), round(num_features * _BINARY_SHARE)
    uniform = num_features - heavy - binary
    if min(heavy, binary, uniform) < 1:
        raise ValueError(f"features: {num_features} is too few for heavy-tailed, uniform and binary features; use at "
                         "least 3")
    problem = _Problem(heavy_log_mean=rng.uniform(0, 3, heavy), heavy_log_scale=rng.uniform(1, 2.5, heavy),
                       heavy_zero_share=rng.uniform(0.05, 0.3, heavy), binary_share=rng.uniform(0.1, 0.5, binary),
                       num_uniform=uniform)
    ordered = np.sort(problem.features(rng, _REFERENCE_DOCS), axis=0)
    informative = rng.choice(num_features, min(_INFORMATIVE, num_features), replace=False)
    trees = []
    for depth in rng.choice(_DEPTHS, _TREES):
        nodes = 2**depth - 1
        chosen = rng.choice(informative, nodes)
        # Each node's threshold at a quantile of its feature, away from the extremes so both sides are populated.
        levels = _LEVEL_LOW + (_LEVEL_HIGH - _LEVEL_LOW) * rng.beta(_LEVEL_SHAPE, _LEVEL_SHAPE, nodes)
        thresholds = ordered[np.rint(levels * (_REFERENCE_DOCS - 1)).astype(np.int64), chosen]
        trees.append(_Tree(chosen, thresholds, rng.normal(size=2**depth)))
    return _Problem(**{**problem.__dict__, "trees": tuple(trees)})


def generate(num_queries: int, docs_per_query: int = 120, num_features: int = 136, seed: int = 0) -> RankingData:
    """`seed` draws the queries, documents and noise; the problem is the same for every seed."""
    rng, offsets = drawn_queries(num_queries, docs_per_query, seed)
    problem = _problem(num_features)
    features = problem.features(rng, int(offsets[-1]))
    relevance = problem.relevance(features)
    relevance += rng.normal(scale=_RELEVANCE_NOISE * relevance.std(), size=len(relevance))
    return RankingData(features, grades_within_queries(relevance, offsets), offsets)


def main(argv: Sequence[str] | None = None) -> None:
    write_named_file(__doc__, generate, "tree-shaped", argv)


if __name__ == "__main__":
    main()
