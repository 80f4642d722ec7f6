"""How the shipped recipe was chosen: train_ddp.py with flags changed from its shipped defaults, several seeds each,
several runs at a time on one GPU, on one of the ranking benchmark's generated datasets (`--dataset`: search, the
default, or trees); and what averaging the seeds' models (an ensemble) would add.

    python -m benchmarks.ranking.ranking_recipes --variants "width=256;embedding-width=32,embedding-layers=4" \\
        --seeds 0,1,2 --parallel 6 --work /tmp/recipes       # a GPU host, the ranking benchmark's GPU size
    python -m benchmarks.ranking.ranking_recipes --size cpu --variants "dropout=0" --seeds 0,1 --parallel 1  # 2 cores

The shipped defaults always run as the first variant. Each run is train_ddp.py launched as a user launches it, with
`--seed S` and `--test FILE`; its test NDCG@10 is the one its log reports. The ensemble's is scored here: each seed's
exported model (the artifact's own scorer, preprocessing included) scores the test file and the seeds' scores are
averaged per document. Runs that share a GPU slow each other down, so the times say how long the runs took side by
side, not what one run takes alone (benchmarks.ranking.ranking_quality measures that). Table on stdout; section
`recipe-ensembles-<size>` in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import torch

from benchmarks.harness.machine import SAFE_NCCL_ENV, machine_description
from benchmarks.harness.models import SHIPPED_MODEL, model_line
from benchmarks.harness.report import BENCHMARKS_DOC, markdown_table, provenance, write_section
from benchmarks.ranking.ranking_quality import (GENERATORS, add_size_arguments, chosen_size, variant_flags,
                                                write_generated, written_data)
from benchmarks.ranking.time_to_model import ENTRY_POINTS, Run, held_out_ndcg_at_10, run_project
from ranker.data.channels import read_letor_file
from ranker.model.export import load_scorer

SHIPPED = "shipped defaults"
DATASET_NAMES = {"search": "search-like", "trees": "tree-shaped"}


def run_name(label: str, seed: int) -> str:
    slug = "".join(character if character.isalnum() or character in ".=" else "-" for character in label)
    return f"{slug}-seed{seed}"


def model_scores(model_dir: Path, features: np.ndarray, device: str, rows_per_pass: int = 65_536) -> np.ndarray:
    """The exported model's scores (its preprocessing included) of `[documents, features]`, on `device`."""
    scorer = load_scorer(model_dir).to(device)
    with torch.inference_mode():
        return np.concatenate([scorer(torch.from_numpy(features[first:first + rows_per_pass]).to(device))
                               .float().cpu().numpy() for first in range(0, len(features), rows_per_pass)])


def ensemble_ndcg(model_dirs: list[Path], test: Path, device: str) -> float:
    """Test NDCG@10 of the models' scores averaged per document."""
    data = read_letor_file(test)
    scores = np.mean([model_scores(folder, data.features, device) for folder in model_dirs], axis=0)
    return held_out_ndcg_at_10(scores, data.labels, data.query_offsets)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_size_arguments(parser)
    parser.add_argument("--dataset", choices=tuple(GENERATORS), default="search",
                        help="the generated dataset (benchmarks.ranking.ranking_quality's)")
    parser.add_argument("--variants", default="", help="as benchmarks.ranking.ranking_quality's: `flag=value,...;...`")
    parser.add_argument("--base", default="", help="flags every run takes, the shipped defaults' row included "
                        "(`flag=value,...`), e.g. a longer cap to compare recipes at convergence")
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds every variant runs with")
    parser.add_argument("--variant-seeds", default=None,
                        help="seeds of the variants other than the shipped defaults (default: --seeds)")
    parser.add_argument("--parallel", type=int, default=1, help="runs at a time")
    parser.add_argument("--threads", type=int, default=None, help="OMP_NUM_THREADS of each run")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--work", type=Path, required=True, help="folder for the data, logs and models")
    parser.add_argument("--doc", type=Path, default=BENCHMARKS_DOC)
    parser.add_argument("--section", help="docs/benchmarks.md section to write (default: recipe-ensembles-SIZE)")
    args = parser.parse_args(argv)
    seeds = [int(seed) for seed in args.seeds.split(",")]
    variant_seeds = [int(seed) for seed in (args.variant_seeds or args.seeds).split(",")]
    base = variant_flags(args.base)[1] if args.base.strip() else ()
    variants = {SHIPPED: ()}
    for variant in filter(str.strip, args.variants.split(";")):
        entry, flags = variant_flags(variant)
        if entry != "native":
            parser.error(f"--variants: {variant!r}: recipes are chosen with train_ddp.py; drop the entry point prefix")
        variants[" ".join(flags)] = flags
    env = {**os.environ, **SAFE_NCCL_ENV, "PYTHONUNBUFFERED": "1"}
    if args.device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    if args.threads:
        env["OMP_NUM_THREADS"] = str(args.threads)
    size = chosen_size(args)
    folder = args.work / args.dataset
    train, test = written_data(folder, {"dataset": args.dataset, **size},
                               lambda: write_generated(folder, args.dataset, size["queries"], size["docs_per_query"],
                                                       size["features"]))

    def launch(label: str, seed: int) -> Run:
        flags = (*base, *variants[label], "--seed", str(seed))
        print(f"running {label}, seed {seed} ...", flush=True)
        return run_project(ENTRY_POINTS["native"], 1, train, test, None, args.work, env, flags=flags,
                           name=run_name(label, seed))

    with ThreadPoolExecutor(args.parallel) as pool:
        futures = {(label, seed): pool.submit(launch, label, seed) for label in variants
                   for seed in (seeds if label == SHIPPED else variant_seeds)}
    rows = []
    for label in variants:
        label_seeds = seeds if label == SHIPPED else variant_seeds
        runs = [futures[(label, seed)].result() for seed in label_seeds]
        models = [args.work / f"{run_name(label, seed)}-1" / "model" for seed in label_seeds]
        together = ensemble_ndcg(models, test, args.device) if len(label_seeds) > 1 else None
        scores = [run.ndcg_at_10 for run in runs]
        rows.append([label, ", ".join(f"{seed}: {score:.4f}" for seed, score in zip(label_seeds, scores)),
                     f"{statistics.mean(scores):.4f}",
                     f"{together:.4f}" if together is not None else "-",
                     f"{statistics.mean(run.wall for run in runs):.1f}"])
        print(rows[-1], flush=True)
    table = markdown_table(["recipe (flags beside the shipped defaults)", "test NDCG@10 by seed", "mean",
                            "ensemble of its seeds", "launch to model (s), side by side"], rows)
    also = f"; every run also takes `{' '.join(base)}`" if base else ""
    body = (f"{provenance(machine=machine_description(args.device))}\n{model_line([SHIPPED_MODEL])}\n"
            f"- Recipes: the shipped defaults, and each recipe changes the flags it names{also}\n- Data: "
            f"{DATASET_NAMES[args.dataset]}, {size['queries']:,} training "
            f"queries, a fifth held out for validation; test NDCG@10 on a separate test file. {args.parallel} run(s) at "
            f"a time on one {'GPU' if args.device == 'cuda' else 'CPU'}\n\n{table}\n")
    print(table)
    write_section(args.section or f"recipe-ensembles-{args.size}", f"How the recipe was chosen ({args.size.upper()} size, "
                  f"{DATASET_NAMES[args.dataset]} data, seeds and their ensemble)", body, doc=args.doc)


if __name__ == "__main__":
    sys.exit(main())
