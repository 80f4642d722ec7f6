"""The CDK app's synthesized cloud assembly, as `cdk synth` produces it, cached by the app's source.

Local mode runs the app command from cdk.json with the CLI's two inputs (CDK_OUTDIR, CDK_CONTEXT_JSON from
cdk.json's context); the assembly is reused while app.py, cdk.json, stacks/, lambda/ and training_code/ are
unchanged (and a `source_dir` of the user's own), since synthesis (with its Lambda and source bundles) is the slowest step of a demo. Assemblies are kept
under a folder named by that source fingerprint and appear there complete (synthesized aside, then renamed), so
the demo and test sessions running at the same time share them safely; a file lock per fingerprint makes a session
that needs an assembly another is synthesizing wait for it rather than synthesize it again. `-c key=value` context (the demo's
`--framework-version`) is part of the fingerprint.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
APP_INPUTS = ("app.py", "cdk.json", "stacks", "lambda", "training_code")
SYNTH_CACHE = PROJECT_ROOT / "local-runs" / "synth"
_FINGERPRINT_LENGTH = 16
# A running demo or test session keeps using the assembly it started with while the sources change under it.
_STALE_AFTER_SECONDS = 3600


def _source_fingerprint(context: Mapping[str, str]) -> str:
    digest = hashlib.sha256(json.dumps(dict(context), sort_keys=True).encode())
    # A source folder of the user's own (`-c source_dir=...`) is bundled too: its files count like the app's.
    own_code = [Path(context["source_dir"])] if context.get("source_dir") else []
    for root in [PROJECT_ROOT / name for name in APP_INPUTS] + own_code:
        files = [root] if root.is_file() else sorted(path for path in root.rglob("*") if path.is_file()
                                                      and "__pycache__" not in path.parts)
        for path in files:
            digest.update(path.relative_to(root.parent).as_posix().encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def synthesize(cache_dir: Path = SYNTH_CACHE, context: Mapping[str, str] | None = None) -> Path:
    """The cloud assembly folder (templates, assets.json, asset files), synthesized now or reused.

    `context` is what `npx cdk synth -c key=value` would add on top of cdk.json's context.
    """
    context = context or {}
    fingerprint = _source_fingerprint(context)[:_FINGERPRINT_LENGTH]
    assembly = cache_dir / fingerprint
    if (assembly / "manifest.json").is_file():
        return assembly
    cache_dir.mkdir(parents=True, exist_ok=True)
    # One synthesis per fingerprint at a time: a second session (a parallel test worker, a demo) waits for the first
    # and reuses its assembly instead of spending the same minute of CPU beside it.
    with (cache_dir / f".{fingerprint}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (assembly / "manifest.json").is_file():
            return assembly
        return _synthesize_into(assembly, fingerprint, cache_dir, context)


def _synthesize_into(assembly: Path, fingerprint: str, cache_dir: Path, context: Mapping[str, str]) -> Path:
    scratch = Path(tempfile.mkdtemp(prefix=f".{fingerprint}-", dir=cache_dir))
    cdk_json = json.loads((PROJECT_ROOT / "cdk.json").read_text())
    env = {**os.environ, **quiet_node_environment(), "CDK_OUTDIR": str(scratch),
           "CDK_CONTEXT_JSON": json.dumps({**cdk_json.get("context", {}), **context})}
    completed = subprocess.run(shlex.split(cdk_json["app"]), cwd=PROJECT_ROOT, env=env, capture_output=True,
                               text=True)
    if completed.returncode != 0:
        shutil.rmtree(scratch, ignore_errors=True)
        output = "\n".join(text[-3000:] for text in (completed.stdout, completed.stderr) if text.strip())
        raise RuntimeError(f"synthesizing the CDK app ({cdk_json['app']}) failed with exit code "
                           f"{completed.returncode}:\n{output or '(it printed nothing)'}\nfix the app, then run again")
    try:
        scratch.rename(assembly)
    except OSError:  # another process synthesized the same sources first: theirs is as good
        shutil.rmtree(scratch, ignore_errors=True)
    _remove_stale_assemblies(cache_dir, keep=assembly)
    return assembly


def quiet_node_environment() -> dict[str, str]:
    """What keeps jsii's Node end-of-life banner out of a synthesis's output: jsii prints it on every start under a
    Node release it no longer supports unless JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION lists that release's major
    version (`1` does not silence it; jsii's checkNode in jsii/_embedded/jsii/bin__jsii-runtime.js). The Makefile sets
    the same from the same node."""
    node = os.environ.get("JSII_NODE", "node")  # the node jsii starts (jsii/_kernel/providers/process.py)
    try:
        major = subprocess.run([node, "-p", "process.versions.node.split('.')[0]"], capture_output=True, text=True,
                               check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return {}  # no node to run: the synthesis itself says so
    return {"JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": major}


def _remove_stale_assemblies(cache_dir: Path, keep: Path) -> None:
    """Assemblies of earlier sources and their locks, once no session can still be using them."""
    cutoff = time.time() - _STALE_AFTER_SECONDS
    for path in cache_dir.iterdir():
        assembly = path.is_dir() and len(path.name) == _FINGERPRINT_LENGTH and path != keep
        lock = path.name.endswith(".lock") and path.name != f".{keep.name}.lock"
        if (assembly or lock) and path.stat().st_mtime < cutoff:
            if assembly:
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
