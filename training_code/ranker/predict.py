"""Scores LETOR text with a finished job's model: one score per row and, where rows form queries, NDCG@k.

    python -m ranker.predict --model model.tar.gz --input TEST_DIR [--output scores.tsv]

`--model` is the job's `model.tar.gz` (or the folder it unpacks to); `--input` one LETOR file or a folder of them,
read as training reads a channel. The scores go to `--output` as TSV (`file`, `row`, `qid`, `score`; rows in file
order, `-` for stdout). Rows with a `qid:` column or a `.query` group file form queries, and NDCG@1/3/5/10 over them
(sklearn's definition, as the job's metrics.json) is printed; run on the job's test channel it prints its
`test_ndcg@k`. Runs on CPU, without gradients.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import numpy as np
import torch

from ranker.data import channels
from ranker.data.letor_parser import ParsedRows
from ranker.data.ranking_data import RankingData, concatenate
from ranker.model.metrics import NDCG_CUTOFFS, ndcg_per_query
from ranker.serving import artifact


@dataclass(frozen=True)
class ScoredFile:
    path: Path
    rows: ParsedRows
    scores: np.ndarray

    def as_queries(self) -> RankingData | None:
        """The scores as a one-column RankingData of this file's queries (None when the file has none), so the
        padding that evaluation uses applies to them too."""
        grouping = channels.query_grouping(self.path, self.rows)
        if grouping is None:
            return None
        order, offsets = grouping
        order = np.arange(len(self.scores)) if order is None else order
        return RankingData(self.scores[order, None], self.rows.labels[order].astype(np.float32), offsets)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m ranker.predict", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, required=True, help="the job's model.tar.gz, or its unpacked folder")
    parser.add_argument("--input", type=Path, required=True, help="a LETOR text file, or a folder of them")
    parser.add_argument("--output", default="scores.tsv", help="TSV of scores, one per row (default scores.tsv); "
                        "- for stdout")
    args = parser.parse_args(argv)
    try:
        scored = score_input(args.model, args.input)
    except ValueError as error:
        parser.exit(2, f"error: {error}\n")
    report = sys.stderr if args.output == "-" else sys.stdout
    if args.output == "-":
        write_scores(scored, sys.stdout)
    else:
        with open(args.output, "w") as handle:
            write_scores(scored, handle)
    rows = sum(len(file.scores) for file in scored)
    print(f"scored {rows} rows of {len(scored)} file(s) into {args.output}", file=report)
    print(summary(scored), file=report)


def score_input(model: Path, input_path: Path) -> list[ScoredFile]:
    files = channels.letor_files(input_path)
    if not files:
        raise ValueError(f"input: {input_path} is not a LETOR file nor a folder holding one; pass the file, or a "
                         "folder with rank.test (+ rank.test.query)")
    with artifact.unpacked(model) as model_dir:
        scorer = artifact.ArtifactScorer.load(model_dir)
    scored = []
    for path in files:
        rows = channels.read_letor_rows(path)
        scored.append(ScoredFile(path, rows, scorer.score(rows.features, str(path))))
    return scored


def ndcg(scored: list[ScoredFile]) -> tuple[dict[int, float], int]:
    """NDCG@k for each cutoff, averaged over every query of the files that form queries, and the query count."""
    parts = [queries for file in scored if (queries := file.as_queries()) is not None]
    if not parts:
        return {}, 0
    scores, labels, mask = (torch.from_numpy(array) for array in concatenate(parts).padded())
    per_query = {k: ndcg_per_query(scores[..., 0], labels, mask, k) for k in NDCG_CUTOFFS}
    return {k: float(values.mean()) for k, values in per_query.items()}, int(mask.shape[0])


def summary(scored: list[ScoredFile]) -> str:
    values, queries = ndcg(scored)
    if not queries:
        return "NDCG: not computed, no file says which query each row belongs to (a qid: column or a .query file)"
    return " ".join(f"ndcg@{k}={value:.6f}" for k, value in values.items()) + f" queries={queries}"


def write_scores(scored: list[ScoredFile], out: TextIO) -> None:
    out.write("file\trow\tqid\tscore\n")
    for file in scored:
        qids = file.rows.qids.tolist() if file.rows.qids is not None else [""] * len(file.scores)
        out.writelines(f"{file.path.name}\t{row}\t{qid}\t{score!r}\n"
                       for row, (qid, score) in enumerate(zip(qids, file.scores.tolist()), start=1))


if __name__ == "__main__":
    main()
