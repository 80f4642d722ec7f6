"""LightGBM lambdarank as a ranking engineer runs it: its own script, scikit-learn's svmlight loader, every core.
benchmarks.time_to_model and benchmarks.ranking_quality run it beside the project's entry points:

    python benchmarks/baselines/lightgbm_lambdarank.py --train rank.train --test rank.test --output DIR [--threads N]

It prints `lightgbm: <event>` lines that the benchmarks time as they arrive, saves the model as DIR/lightgbm.txt and
the held-out scores with their labels and query bounds as DIR/test_scores.npz, which the benchmarks score with the
metric the entry points log. Its own process, without torch: nothing else's thread pool shares its cores. The line
that ends training says how many cores its threads kept busy, so a starved peer shows in the table.
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

import numpy as np

# LightGBM's usual MSLR-WEB settings (its own lambdarank examples and the common MSLR baselines).
PARAMS = {"objective": "lambdarank", "num_leaves": 255, "learning_rate": 0.05, "min_data_in_leaf": 50,
          "verbosity": -1}


def mark(event: str) -> None:
    print(f"lightgbm: {event}", flush=True)


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def query_bounds(query_ids: np.ndarray) -> np.ndarray:
    """Offsets of the runs of equal query ids: `[0, end of query 1, ..., len]`."""
    return np.concatenate([[0], np.flatnonzero(np.diff(query_ids)) + 1, [len(query_ids)]])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train", type=Path, required=True, help="LETOR text with qid: columns")
    parser.add_argument("--test", type=Path, required=True, help="held-out LETOR text with qid: columns")
    parser.add_argument("--output", type=Path, required=True, help="folder for lightgbm.txt and test_scores.npz")
    parser.add_argument("--rounds", type=int, default=500)
    parser.add_argument("--threads", type=int, required=True, help="LightGBM's num_threads")
    args = parser.parse_args()
    # Imported here, not at the top: the benchmarks read PARAMS where LightGBM is not installed.
    import lightgbm
    from sklearn.datasets import load_svmlight_file

    mark("ingest start")
    train_x, train_y, train_q = load_svmlight_file(str(args.train), dtype=np.float32, query_id=True,
                                                   zero_based=False)
    test_x, test_y, test_q = load_svmlight_file(str(args.test), n_features=train_x.shape[1], dtype=np.float32,
                                                query_id=True, zero_based=False)
    mark("ingest end")
    # Dense, not the loader's sparse matrix: the peer gets its faster path. On 180k search-like documents (counts
    # and flags that are often 0), 30 rounds on 2 threads took 6.1 s dense against 7.3 s sparse.
    dataset = lightgbm.Dataset(train_x.toarray(), train_y, group=np.diff(query_bounds(train_q)))
    mark("training start")
    started, cpu_started = time.perf_counter(), cpu_seconds()
    booster = lightgbm.train({**PARAMS, "num_threads": args.threads}, dataset, num_boost_round=args.rounds)
    busy = (cpu_seconds() - cpu_started) / (time.perf_counter() - started)
    mark(f"training end cores_busy={busy:.1f}")
    scores = booster.predict(test_x.toarray(), num_threads=args.threads)
    args.output.mkdir(parents=True, exist_ok=True)
    np.savez(args.output / "test_scores.npz", scores=scores, labels=test_y, offsets=query_bounds(test_q))
    mark("evaluation end")
    booster.save_model(str(args.output / "lightgbm.txt"))


if __name__ == "__main__":
    main()
