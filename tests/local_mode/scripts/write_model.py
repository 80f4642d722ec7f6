"""Fixture entry point: reads the SM_* contract, prints metrics, writes a model, a plot stand-in and a checkpoint."""

import argparse
import json
import os
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, required=True)
parser.add_argument("--loss", required=True)
args = parser.parse_args()

train_files = sorted(p.name for p in Path(os.environ["SM_CHANNEL_TRAIN"]).rglob("*") if p.is_file())
model_dir = Path(os.environ["SM_MODEL_DIR"])
checkpoints = Path(os.environ["SAGEMAKER_BASE_DIR"]) / "checkpoints"
resumed = (checkpoints / "last.txt").read_text() if (checkpoints / "last.txt").exists() else "none"
for epoch in range(1, args.epochs + 1):
    print(f"epoch={epoch} train_loss={1.0 / epoch:.4f} val_ndcg@10={0.5 + 0.1 * epoch:.4f}", flush=True)
(model_dir / "model.json").write_text(json.dumps({
    "epochs": args.epochs, "loss": args.loss, "train_files": train_files,
    "hosts": json.loads(os.environ["SM_HOSTS"]), "current_host": os.environ["SM_CURRENT_HOST"],
    "user_args": json.loads(os.environ["SM_USER_ARGS"]), "resumed": resumed,
}))
(Path(os.environ["SM_OUTPUT_DATA_DIR"]) / "curves.txt").write_text("curve")
(checkpoints / "last.txt").write_text(f"epoch {args.epochs}")
