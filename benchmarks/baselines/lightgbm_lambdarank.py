"""LightGBM lambdarank as a ranking engineer runs it: its own script on every core, the text read into arrays by the
fastest reader at hand (the project's multi-process LETOR parser, ranker.data.channels, which does not import torch),
so its time is LightGBM's own. benchmarks.time_to_model and benchmarks.ranking_quality run it beside the project's
entry points:

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train", type=Path, required=True, help="LETOR text (a qid: column or a .query file)")
    parser.add_argument("--test", type=Path, required=True, help="held-out LETOR text, the same format")
    parser.add_argument("--output", type=Path, required=True, help="folder for lightgbm.txt and test_scores.npz")
    parser.add_argument("--rounds", type=int, default=500)
    parser.add_argument("--threads", type=int, required=True, help="LightGBM's num_threads")
    args = parser.parse_args()
    # Imported here, not at the top: the benchmarks read PARAMS where LightGBM is not installed.
    import lightgbm
    from ranker.data.channels import read_letor_file

    mark("ingest start")
    train, test = read_letor_file(args.train), read_letor_file(args.test)
    mark("ingest end")
    # Dense arrays, LightGBM's faster path: on 180k search-like documents (counts and flags that are often 0), 30
    # rounds on 2 threads took 6.1 s dense against 7.3 s on a sparse matrix.
    dataset = lightgbm.Dataset(train.features, train.labels, group=np.diff(train.query_offsets))
    mark("training start")
    started, cpu_started = time.perf_counter(), cpu_seconds()
    booster = lightgbm.train({**PARAMS, "num_threads": args.threads}, dataset, num_boost_round=args.rounds)
    busy = (cpu_seconds() - cpu_started) / (time.perf_counter() - started)
    mark(f"training end cores_busy={busy:.1f}")
    scores = booster.predict(test.features, num_threads=args.threads)
    args.output.mkdir(parents=True, exist_ok=True)
    np.savez(args.output / "test_scores.npz", scores=scores, labels=test.labels, offsets=test.query_offsets)
    mark("evaluation end")
    booster.save_model(str(args.output / "lightgbm.txt"))


if __name__ == "__main__":
    main()
