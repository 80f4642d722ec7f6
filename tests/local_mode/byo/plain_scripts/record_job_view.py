"""Fixture entry point: each process records what the job gave it, in its host's model folder as
`process-<rank>.json`: its environment, the training files its host holds, and the train channel's distribution as
sagemaker_distributed reports it to any script."""

import json
import os

from sagemaker_distributed import paths

rank = os.environ.get("RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
train = paths.channel("train")
record = {
    "host": os.environ["SM_CURRENT_HOST"],
    "environment": dict(os.environ),
    "train_files": sorted(str(path.relative_to(train)) for path in train.rglob("*") if path.is_file()),
    "distributions": {name: paths.channel_distribution(name) for name in ("train", "validation")},
}
(paths.model_dir() / f"process-{rank}.json").write_text(json.dumps(record))
