"""Puts the inference handler into the model folder, so `model.tar.gz` serves as it is.

`code/inference.py` (ranker.serving.handler), copies of the packages it imports, and `code/requirements.txt` with
what the PyTorch inference container may lack, pinned as the training container installs it; the container's
toolkit installs that file before it loads the handler.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import ranker

CODE_DIR, HANDLER_MODULE, REQUIREMENTS = "code", "inference.py", "requirements.txt"
# The folder SageMaker unpacks the training code into: the packages and the requirements file sit at its root.
TRAINING_CODE = Path(ranker.__file__).resolve().parent.parent
# The whole packages, not the handler's imports one by one: a module added to the model (a preprocessing layer, say)
# then serves without a list to keep up to date. ranker.config needs sagemaker_distributed.paths.
PACKAGES = ("ranker", "sagemaker_distributed")
# Beyond torch and numpy: safetensors holds the weights; scikit-learn (with scipy) reads the LETOR rows that the
# vectorised parser hands over (compressed, or malformed ones, whose error it words).
SERVING_PACKAGES = ("safetensors", "scikit-learn", "scipy")
_REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9_.-]+)")


def write_serving_code(model_dir: Path, training_code: Path = TRAINING_CODE) -> Path:
    """Writes `model_dir/code/` and returns it."""
    code = Path(model_dir) / CODE_DIR
    shutil.rmtree(code, ignore_errors=True)
    for package in PACKAGES:
        shutil.copytree(training_code / package, code / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copyfile(Path(__file__).with_name("handler.py"), code / HANDLER_MODULE)
    (code / REQUIREMENTS).write_text(serving_requirements(training_code / REQUIREMENTS))
    return code


def serving_requirements(training_requirements: Path) -> str:
    """The training requirements' lines for SERVING_PACKAGES (markers kept), so both containers get one pin."""
    lines = [line for line in training_requirements.read_text().splitlines()
             if (name := _REQUIREMENT_NAME.match(line)) and name.group(1).lower() in SERVING_PACKAGES]
    found = {_REQUIREMENT_NAME.match(line).group(1).lower() for line in lines}
    if found != set(SERVING_PACKAGES):
        raise ValueError(f"{training_requirements}: no pin for {sorted(set(SERVING_PACKAGES) - found)}, which the "
                         "inference handler needs; pin it there (name==version)")
    header = "# What the inference handler needs beyond the serving container's torch and numpy (ranker.serving.package)"
    return "\n".join([header, *lines]) + "\n"
