"""Fixture entry point for tuning: its objective is a known function of its flags, printed as the ranker prints
metrics; `--fail-above` makes trials whose learning rate exceeds it fail, `--hold-seconds` keeps each trial running
long enough for trials to overlap."""

import argparse
import math
import time

parser = argparse.ArgumentParser()
parser.add_argument("--learning-rate", type=float, required=True)
parser.add_argument("--epochs", type=int, default=1)
parser.add_argument("--loss", default="listnet")
parser.add_argument("--hold-seconds", type=float, default=0.0)
parser.add_argument("--fail-above", type=float, default=math.inf)
args = parser.parse_args()

time.sleep(args.hold_seconds)
if args.learning_rate > args.fail_above:
    raise SystemExit(f"learning rate {args.learning_rate} diverged")
for epoch in range(1, args.epochs + 1):
    # Peaks at learning rate 0.01, grows with epochs: the best trial is predictable from the flags alone.
    score = epoch / (epoch + 1) - abs(math.log10(args.learning_rate) + 2) / 10
    print(f"epoch={epoch} val_ndcg@10={score:.6f}", flush=True)
