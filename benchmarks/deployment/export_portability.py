"""Which torch loads which serving export: `model.pt2` (torch.export) and `model.pt` (TorchScript), each written by
the torch of one environment and loaded by the torch of every other.

Run: `.venv/bin/python -m benchmarks.deployment.export_portability`. The environments are the project's venv and the
container-parity environments of the oldest and newest container profiles (local_mode.container.container_envs, built on
first use). Prints the table and records it in docs/benchmarks.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.harness.project_code import TRAINING_CODE
from benchmarks.harness.report import markdown_table, provenance, write_section

# The reference architecture at a small width, log1p on: what a job writes, with preprocessing in the exports.
_WRITE = """
import sys, torch, numpy as np
from pathlib import Path
from ranker.config import ModelConfig
from ranker.model import export, portable
from ranker.model.mlp import RankingMLP
torch.manual_seed(0)
folder, config = Path(sys.argv[1]), ModelConfig(num_features=136, width=64)
export.save_model(folder, RankingMLP(config), config, True, {})
written = portable.save_exported_program(folder)
features = np.random.default_rng(0).exponential(3.0, size=(33, 136)).astype(np.float32)
np.save(folder / "features.npy", features)
np.save(folder / "scores.npy", export.load_scorer(folder)(torch.from_numpy(features)).detach().numpy())
print(torch.__version__, written is not None)
"""
_LOAD = """
import json, sys, torch, numpy as np
from pathlib import Path
folder = Path(sys.argv[1])
features, expected = torch.from_numpy(np.load(folder / "features.npy")), np.load(folder / "scores.npy")
outcome = {}
for name, load in (("model.pt2", lambda path: torch.export.load(path).module()), ("model.pt", torch.jit.load)):
    try:
        with torch.no_grad():
            scores = load(str(folder / name))(features).numpy()
        outcome[name] = f"loads, max diff {float(np.abs(scores - expected).max()):.1e}"
    except Exception as error:
        outcome[name] = f"fails: {type(error).__name__}"
print(json.dumps(outcome))
"""
_ONNX = """
import importlib.util, json
print(json.dumps({name: importlib.util.find_spec(name) is not None for name in ("onnx", "onnxscript", "onnxruntime")}))
"""


def environments() -> dict[str, str]:
    """Label -> interpreter: the project's venv, then each parity profile's environment."""
    from sagemaker_distributed import container_profiles

    from local_mode.container.container_envs import container_env

    found = {}
    for python in [sys.executable] + [str(container_env(profile).python) for profile in
                                      (container_profiles.PROFILES[0], container_profiles.PROFILES[-1])]:
        version = subprocess.run([python, "-c", "import torch; print(torch.__version__)"], check=True,
                                 capture_output=True, text=True).stdout.strip()
        found[f"torch {version.split('+')[0]}"] = python
    return found


def run(python: str, script: str, *args: str) -> str:
    return subprocess.run([python, "-c", script, *args], check=True, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(TRAINING_CODE), "OMP_NUM_THREADS": "1"}).stdout.strip()


def main() -> None:
    envs = environments()
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for writer, writer_python in envs.items():
            folder = Path(scratch) / writer.replace(" ", "-")
            run(writer_python, _WRITE, str(folder))
            for loader, loader_python in envs.items():
                outcome = json.loads(run(loader_python, _LOAD, str(folder)))
                rows.append([writer, loader, outcome["model.pt2"], outcome["model.pt"]])
    onnx = {label: json.loads(run(python, _ONNX)) for label, python in envs.items()}
    table = markdown_table(["written by", "loaded by", "model.pt2 (torch.export)", "model.pt (TorchScript)"], rows)
    packages = markdown_table(["environment", "onnx", "onnxscript", "onnxruntime"],
                              [[label, *("yes" if found else "no" for found in present.values())]
                               for label, present in onnx.items()])
    body = (f"{provenance()}\n- Model: the reference MLP (7 layers, width 64, 136 features, log1p), scored on 33 "
            f"rows; \"max diff\" is against the writing torch's own scorer\n\n{table}\n\n"
            f"ONNX packages in the same environments (torch writes ONNX only with `onnx`/`onnxscript`, and torch "
            f"cannot load it: scoring needs `onnxruntime`):\n\n{packages}")
    print(body)
    write_section("export_portability", "Which torch loads which serving export", body)


if __name__ == "__main__":
    main()
