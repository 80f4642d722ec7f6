"""What a training script sees when ModelTrainer's drivers start it: run by test_model_trainer_drivers.py as a job's
entry point beside the sagemaker_distributed package; writes its view into the model folder."""

import json
import os
import sys
from dataclasses import asdict

from sagemaker_distributed import detect_topology, paths

view = {
    "cwd": os.getcwd(),
    "argv": sys.argv[1:],
    "environment": {name: value for name, value in os.environ.items() if name.startswith("SM_")},
    "topology": asdict(detect_topology()),
    "in_training_job": paths.in_training_job(),
    "model_dir": str(paths.model_dir()),
    "train_channel": str(paths.channel("train")),
    "hyperparameters": paths.hyperparameters(),
}
(paths.model_dir() / f"view-{view['topology']['rank']}.json").write_text(json.dumps(view))
