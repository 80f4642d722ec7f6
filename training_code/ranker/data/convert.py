"""Converts a LETOR text channel into binary shards: `python -m ranker.data.convert --input DIR --output DIR`."""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path

from ranker.data import channels as data
from ranker.data import shards


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--input", type=Path, required=True, help="LETOR text file or folder (a training channel)")
    parser.add_argument("--output", type=Path, required=True, help="folder to write manifest.json and .npy shards")
    parser.add_argument("--docs-per-shard", type=int, default=1_000_000, help="documents per shard (whole queries)")
    parser.add_argument("--num-features", type=int, default=None, help="columns to write (default: from the data)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    loaded = data.load_channel(args.input, args.num_features)
    names = shards.write_shards(loaded, args.output, args.docs_per_shard)
    print(f"wrote {len(names)} shard(s): {loaded.num_queries} queries, {len(loaded.labels)} documents, "
          f"{loaded.num_features} features to {args.output} in {time.perf_counter() - started:.2f}s", flush=True)


if __name__ == "__main__":
    main()
