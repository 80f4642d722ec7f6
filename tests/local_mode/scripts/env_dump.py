"""Fixture entry point: records the SM_* environment and arguments it was started with."""

import json
import os
import sys
from pathlib import Path

target = Path(os.environ.get("ENV_DUMP", Path(os.environ["SM_MODEL_DIR"]) / "environment.json"))
target.write_text(json.dumps({"argv": sys.argv[1:],
                              "environment": {k: v for k, v in os.environ.items() if k.startswith("SM_")}}))
