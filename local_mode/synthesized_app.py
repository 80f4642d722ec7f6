"""The CDK app's synthesized cloud assembly, as `cdk synth` produces it, cached by the app's source.

Local mode runs the app command from cdk.json with the CLI's two inputs (CDK_OUTDIR, CDK_CONTEXT_JSON from
cdk.json's context); the assembly is reused while app.py, cdk.json, stacks/, lambda/ and training_code/ are
unchanged, since synthesis (with its Lambda and source bundles) is the slowest step of a demo.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
APP_INPUTS = ("app.py", "cdk.json", "stacks", "lambda", "training_code")


def _source_fingerprint() -> str:
    digest = hashlib.sha256()
    for name in APP_INPUTS:
        root = PROJECT_ROOT / name
        files = [root] if root.is_file() else sorted(path for path in root.rglob("*") if path.is_file()
                                                      and "__pycache__" not in path.parts)
        for path in files:
            digest.update(path.relative_to(PROJECT_ROOT).as_posix().encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def synthesize(cache_dir: Path) -> Path:
    """The cloud assembly folder (templates, assets.json, asset files), synthesized now or reused."""
    fingerprint = _source_fingerprint()
    assembly = cache_dir / "cdk.out"
    stamp = cache_dir / "source.sha256"
    if stamp.is_file() and stamp.read_text() == fingerprint and (assembly / "manifest.json").is_file():
        return assembly
    shutil.rmtree(assembly, ignore_errors=True)
    cdk_json = json.loads((PROJECT_ROOT / "cdk.json").read_text())
    env = {**os.environ, "CDK_OUTDIR": str(assembly), "CDK_CONTEXT_JSON": json.dumps(cdk_json.get("context", {})),
           "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "1"}
    completed = subprocess.run(shlex.split(cdk_json["app"]), cwd=PROJECT_ROOT, env=env, capture_output=True,
                               text=True)
    if completed.returncode != 0:
        raise RuntimeError(f"synthesizing the CDK app ({cdk_json['app']}) failed with exit code "
                           f"{completed.returncode}:\n{completed.stderr[-3000:]}\nfix the app, then run again")
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.write_text(fingerprint)
    return assembly
