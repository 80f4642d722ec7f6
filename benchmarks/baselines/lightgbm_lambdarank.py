"""LightGBM lambdarank as a ranking engineer runs it: its own script on every core, the text read into arrays by the
fastest reader at hand (the project's multi-process LETOR parser, ranker.data.channels, which does not import torch),
so its time is LightGBM's own. benchmarks.ranking.time_to_model and benchmarks.ranking.ranking_quality run it beside
the project's entry points:

    python benchmarks/baselines/lightgbm_lambdarank.py --train rank.train --test rank.test --output DIR [--threads N]
    python benchmarks/baselines/lightgbm_lambdarank.py ... --rounds 5000 --early-stopping 50   # trained to convergence

It prints `lightgbm: <event>` lines that the benchmarks time as they arrive, saves the model as DIR/lightgbm.txt and
the held-out scores with their labels and query bounds as DIR/test_scores.npz, which the benchmarks score with the
metric the entry points log. Its own process, without torch: nothing else's thread pool shares its cores. The line
that ends training says how many cores its threads kept busy, so a starved peer shows in the table, and how many
seconds scoring the validation queries took (the benchmark's own metric, in NumPy on one thread).

With `--early-stopping N` it trains as a ranking engineer does: on the queries the entry points train on, stopping
once N rounds in a row have not beaten the best NDCG@10 on the queries they hold out for validation (the same split:
ranker.data.channels.split_queries with the entry points' default fraction and seed, and the same NDCG@10,
`QueryNdcg`), up to `--rounds`; each round prints `lightgbm: round=R val_ndcg@10=X`, and the model saved and scored is
the best round's. Without it, it trains `--rounds` rounds on every training query.
"""

from __future__ import annotations

import argparse
import dataclasses
import resource
import time
from pathlib import Path

import numpy as np

# LightGBM's usual MSLR-WEB settings (its own lambdarank examples and the common MSLR baselines).
PARAMS = {"objective": "lambdarank", "num_leaves": 255, "learning_rate": 0.05, "min_data_in_leaf": 50,
          "verbosity": -1}


class QueryNdcg:
    """Mean NDCG@k over queries of one fixed set, exactly as ranker.model.metrics defines it (linear gains, stable
    ranking, queries without a relevant document scoring 0), in NumPy: this process never imports torch. The query
    layout is built once, so scoring every boosting round costs one sort."""

    def __init__(self, labels: np.ndarray, offsets: np.ndarray, k: int = 10):
        sizes = np.diff(offsets)
        self.rows = np.repeat(np.arange(len(sizes)), sizes)
        self.columns = np.arange(len(labels)) - np.repeat(offsets[:-1], sizes)
        self.gains = np.zeros((len(sizes), sizes.max()))
        self.gains[self.rows, self.columns] = labels
        depth = min(k, self.gains.shape[1])
        self.discounts = 1.0 / np.log2(np.arange(depth) + 2.0)
        self.ideal = -np.sort(-self.gains, axis=1)[:, :depth] @ self.discounts

    def __call__(self, scores: np.ndarray) -> float:
        padded = np.full(self.gains.shape, np.inf)  # negated scores: padding ranks last
        padded[self.rows, self.columns] = -np.asarray(scores, np.float64)
        order = np.argsort(padded, axis=1, kind="stable")[:, :len(self.discounts)]
        dcg = np.take_along_axis(self.gains, order, axis=1) @ self.discounts
        return float(np.where(self.ideal > 0, dcg / np.maximum(self.ideal, 1e-12), 0.0).mean())


def entry_point_split() -> tuple[float, int]:
    """The validation fraction and seed the entry points split training queries with by default (ranker.config)."""
    from ranker.config import DataConfig, TrainConfig

    defaults = {field.name: field.default for config in (DataConfig, TrainConfig) for field in dataclasses.fields(config)}
    return defaults["validation_fraction"], defaults["seed"]


def round_reporter(env) -> None:
    """A LightGBM callback: each round's validation NDCG@10, a line the benchmark times as it arrives."""
    (_, _, score, _), = env.evaluation_result_list
    print(f"lightgbm: round={env.iteration + 1} val_ndcg@10={score:.6f}", flush=True)


round_reporter.order = 20  # before early_stopping's (30), which ends training by raising


def mark(event: str) -> None:
    print(f"lightgbm: {event}", flush=True)


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train", type=Path, required=True, help="LETOR text (a qid: column or a .query file)")
    parser.add_argument("--test", type=Path, required=True, help="held-out LETOR text, the same format")
    parser.add_argument("--output", type=Path, required=True, help="folder for lightgbm.txt and test_scores.npz")
    parser.add_argument("--rounds", type=int, default=500, help="rounds, or their cap with --early-stopping")
    parser.add_argument("--early-stopping", type=int, default=0,
                        help="rounds without a better validation NDCG@10 before stopping; 0 trains every round")
    parser.add_argument("--threads", type=int, required=True, help="LightGBM's num_threads")
    args = parser.parse_args()
    # Imported here, not at the top: the benchmarks read PARAMS where LightGBM is not installed.
    import lightgbm
    from ranker.data.channels import read_letor_file, split_queries

    mark("ingest start")
    train, test = read_letor_file(args.train), read_letor_file(args.test)
    mark("ingest end")
    settings: dict = {}
    scoring = 0.0
    if args.early_stopping:
        train, validation = split_queries(train, *entry_point_split())
        validation_ndcg = QueryNdcg(validation.labels, validation.query_offsets)

        def scored(scores: np.ndarray, _) -> tuple[str, float, bool]:
            nonlocal scoring
            started = time.perf_counter()
            score = validation_ndcg(scores)
            scoring += time.perf_counter() - started
            return "ndcg@10", score, True

        settings = {"feval": scored,
                    "callbacks": [round_reporter, lightgbm.early_stopping(args.early_stopping, verbose=False)]}
    # Dense arrays, LightGBM's faster path: on 180k search-like documents (counts and flags that are often 0), 30
    # rounds on 2 threads took 6.1 s dense against 7.3 s on a sparse matrix.
    dataset = lightgbm.Dataset(train.features, train.labels, group=np.diff(train.query_offsets))
    if args.early_stopping:
        settings["valid_sets"] = [lightgbm.Dataset(validation.features, validation.labels, reference=dataset,
                                                   group=np.diff(validation.query_offsets))]
    mark("training start")
    started, cpu_started = time.perf_counter(), cpu_seconds()
    # metric "None": the validation NDCG@10 above is the only one LightGBM computes and stops on.
    booster = lightgbm.train({**PARAMS, "num_threads": args.threads, **({"metric": "None"} if args.early_stopping
                                                                         else {})},
                             dataset, num_boost_round=args.rounds, **settings)
    busy = (cpu_seconds() - cpu_started) / (time.perf_counter() - started)
    mark(f"training end validation_scoring_s={scoring:.1f} cores_busy={busy:.1f}")
    if args.early_stopping:
        mark(f"best round={booster.best_iteration}")
    scores = booster.predict(test.features, num_threads=args.threads)
    args.output.mkdir(parents=True, exist_ok=True)
    np.savez(args.output / "test_scores.npz", scores=scores, labels=test.labels, offsets=test.query_offsets)
    mark("evaluation end")
    booster.save_model(str(args.output / "lightgbm.txt"))


if __name__ == "__main__":
    main()
