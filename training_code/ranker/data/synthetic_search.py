"""Search-like synthetic ranking data, shaped the way trees like it: for benchmarks against gradient-boosted trees.

`python -m ranker.data.synthetic_search --output DIR --queries N [--docs-per-query 120] [--features 136] [--seed S]`
writes `rank.train` with a `qid:` column (LETOR text, ranker.data.synthetic.write_letor), usable as a channel as is.

Where ranker.data.synthetic draws uniform features and relevance from a smooth tanh network (which favours an MLP),
this draws what web-search features look like: heavy-tailed raw counts (lognormal, many zeros, scaled per query),
binary flags and bounded scores; relevance is an ensemble of threshold rules of one to three features each (their
interactions), with Gaussian noise on it, cut into graded labels 0-4 at fixed levels (about MSLR-WEB's shares: most
documents irrelevant, some queries without any relevant one), and a share of labels replaced by random grades.
Query sizes are lognormal around `docs_per_query`, from an eighth of it to twice it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ranker.data.ranking_data import RankingData
from ranker.data.synthetic import write_named_file

# The ranking problem (feature distributions, rules, grade levels) depends on the feature count only, so files
# written with different seeds (training and test channels) are samples of one problem.
_PROBLEM_SEED = 20_261_201
_COUNT_SHARE, _FLAG_SHARE = 0.4, 0.2
_RULES = 64
# Share of documents at each grade 0..4, about MSLR-WEB10K's (52%, 32%, 13%, 2%, 1%).
_GRADE_SHARES = (0.52, 0.32, 0.13, 0.02, 0.01)
_RELEVANCE_NOISE = 0.5
"""Standard deviation of the noise added to the rules' relevance, in units of the relevance's own."""
_LABEL_FLIP_SHARE = 0.05
_REFERENCE_DOCS = 200_000


@dataclass(frozen=True)
class _Problem:
    """The fixed parts: how each feature is drawn, the rules and the grade levels."""

    count_log_mean: np.ndarray
    count_log_scale: np.ndarray
    count_zero_share: np.ndarray
    flag_share: np.ndarray
    score_shape: np.ndarray
    rule_features: list[np.ndarray]
    rule_thresholds: list[np.ndarray]
    rule_weights: np.ndarray
    grade_levels: np.ndarray

    @property
    def num_counts(self) -> int:
        return len(self.count_log_mean)

    @property
    def num_flags(self) -> int:
        return len(self.flag_share)


def _problem(num_features: int) -> _Problem:
    rng = np.random.default_rng(_PROBLEM_SEED)
    counts, flags = round(num_features * _COUNT_SHARE), round(num_features * _FLAG_SHARE)
    scores = num_features - counts - flags
    if min(counts, flags, scores) < 1:
        raise ValueError(f"features: {num_features} is too few for counts, flags and scores; use at least 5")
    partial = _Problem(count_log_mean=rng.uniform(0, 3, counts), count_log_scale=rng.uniform(1, 2.5, counts),
                       count_zero_share=rng.uniform(0.1, 0.6, counts), flag_share=rng.uniform(0.05, 0.5, flags),
                       score_shape=rng.uniform(0.5, 4, (scores, 2)), rule_features=[], rule_thresholds=[],
                       rule_weights=np.zeros(0), grade_levels=np.zeros(0))
    reference = _features(partial, rng, _REFERENCE_DOCS, np.ones(_REFERENCE_DOCS))
    rule_features, rule_thresholds = [], []
    for _ in range(_RULES):
        chosen = rng.choice(num_features, size=rng.integers(1, 4), replace=False)
        levels = rng.uniform(0.3, 0.95, len(chosen))
        rule_features.append(chosen)
        rule_thresholds.append(np.array([np.quantile(reference[:, feature], level)
                                         for feature, level in zip(chosen, levels)]))
    weights = rng.exponential(1.0, _RULES) * rng.choice([-0.3, 1.0], _RULES, p=[0.2, 0.8])
    partial = _Problem(**{**partial.__dict__, "rule_features": rule_features, "rule_thresholds": rule_thresholds,
                          "rule_weights": weights})
    relevance = _noisy_relevance(partial, reference, rng)
    levels = np.quantile(relevance, np.cumsum(_GRADE_SHARES)[:-1])
    return _Problem(**{**partial.__dict__, "grade_levels": levels})


def _features(problem: _Problem, rng: np.random.Generator, num_docs: int, count_scale: np.ndarray) -> np.ndarray:
    """Counts (lognormal, scaled by each document's `count_scale`, some zero), flags, then scores in [0, 1]."""
    counts = np.floor(np.exp(rng.normal(problem.count_log_mean, problem.count_log_scale,
                                        (num_docs, problem.num_counts))) * count_scale[:, None])
    counts[rng.random(counts.shape) < problem.count_zero_share] = 0
    flags = (rng.random((num_docs, problem.num_flags)) < problem.flag_share).astype(np.float64)
    shape = problem.score_shape
    scores = np.rint(rng.beta(shape[:, 0], shape[:, 1], (num_docs, len(shape))) * 10_000) / 10_000
    # The writer's 4-decimal text holds values below 1e9; float32 is what reading the text gives back.
    return np.concatenate([np.minimum(counts, 1e8), flags, scores], axis=1).astype(np.float32)


def _noisy_relevance(problem: _Problem, features: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    relevance = np.zeros(len(features))
    for chosen, thresholds, weight in zip(problem.rule_features, problem.rule_thresholds, problem.rule_weights):
        relevance += weight * np.all(features[:, chosen] > thresholds, axis=1)
    return relevance + rng.normal(scale=_RELEVANCE_NOISE * relevance.std(), size=len(relevance))


def query_sizes(num_queries: int, docs_per_query: int, rng: np.random.Generator) -> np.ndarray:
    """Lognormal around `docs_per_query` (MSLR-WEB's sizes are skewed: many short lists, a long tail), from an
    eighth of it to twice it."""
    sigma = 0.45
    drawn = np.exp(rng.normal(np.log(docs_per_query) - sigma**2 / 2, sigma, num_queries))
    return np.clip(np.rint(drawn), max(1, docs_per_query // 8), 2 * docs_per_query).astype(np.int64)


def drawn_queries(num_queries: int, docs_per_query: int, seed: int) -> tuple[np.random.Generator, np.ndarray]:
    """The generator `seed` starts, having drawn the queries' sizes (`query_sizes`), and their offsets."""
    if num_queries < 1 or docs_per_query < 1:
        raise ValueError(f"queries, docs_per_query: {num_queries}, {docs_per_query}: use at least 1 of each")
    rng = np.random.default_rng(seed)
    sizes = query_sizes(num_queries, docs_per_query, rng)
    return rng, np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


def generate(num_queries: int, docs_per_query: int = 120, num_features: int = 136, seed: int = 0) -> RankingData:
    """`seed` draws the queries, documents and noise; the problem is the same for every seed."""
    rng, offsets = drawn_queries(num_queries, docs_per_query, seed)
    problem = _problem(num_features)
    sizes = np.diff(offsets)
    # A query's counts share one scale (a popular query has large counts on every document).
    count_scale = np.repeat(np.exp(rng.normal(0, 0.7, num_queries)), sizes)
    features = _features(problem, rng, int(offsets[-1]), count_scale)
    labels = np.searchsorted(problem.grade_levels, _noisy_relevance(problem, features, rng)).astype(np.float32)
    flipped = rng.random(len(labels)) < _LABEL_FLIP_SHARE
    labels[flipped] = rng.integers(0, len(_GRADE_SHARES), int(flipped.sum()))
    return RankingData(features, labels, offsets)


def main(argv: Sequence[str] | None = None) -> None:
    write_named_file(__doc__, generate, "search-like", argv)


if __name__ == "__main__":
    main()
