"""How long a container profile's environment takes to build from empty caches: the image's packages installed by uv
(shipped, `local_mode.container.container_envs`) against pip alone (the baseline: the same build with uv out of reach),
measured in the same call, the two installers alternating, and whether both end with the same packages.

    python -m benchmarks.deployment.container_env_build [FRAMEWORK_VERSION ...] [--repeats 1]

Each build runs `local_mode.container.container_envs.container_env` in a process of its own whose XDG_CACHE_HOME is
a new empty folder, so uv's, pip's and the environments' caches all start empty, as on a new machine or CI: every build
fetches the CUDA torch wheel and its libraries (~2.5 GB) and unpacks ~5 GB. Needs the network, pyenv's Python of each
profile and ~10 GB of free disk; the folder is removed after each build. Table on stdout; section
`container-env-build` in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness.machine import machine_description
from benchmarks.harness.project_code import PROJECT_ROOT
from benchmarks.harness.report import markdown_table, provenance, write_section
from stacks.training_code_modules import training_code_module

# Builds one profile's environment and prints its folder; "pip" makes uv unreachable, as on a machine without it.
LAUNCHER = """
import sys
from local_mode.container import container_envs
from stacks.training_code_modules import training_code_module
version, installer = sys.argv[1], sys.argv[2]
if installer == "pip":
    container_envs.project_uv = lambda: None
profiles = training_code_module("sagemaker_distributed/container_profiles.py")
print(container_envs.container_env(profiles.profile_named(version), on_progress=lambda _: None).root)
"""
INSTALLERS = {"uv": "uv (shipped)", "pip": "pip alone (baseline)"}
# Where a caller's settings would send uv or pip to a warm cache instead of the empty one each build gets.
CACHE_SETTINGS = ("UV_CACHE_DIR", "PIP_CACHE_DIR", "PIP_NO_CACHE_DIR")


def build_from_empty_caches(version: str, installer: str) -> tuple[float, dict[str, str]]:
    """Seconds to build `version`'s environment with every cache empty, and the packages it ends with."""
    with tempfile.TemporaryDirectory(prefix="container-env-build-") as cache_home:
        env = {name: value for name, value in os.environ.items() if name not in CACHE_SETTINGS}
        env["XDG_CACHE_HOME"] = cache_home
        started = time.perf_counter()
        built = subprocess.run([sys.executable, "-c", LAUNCHER, version, installer], cwd=PROJECT_ROOT, env=env,
                               capture_output=True, text=True)
        seconds = time.perf_counter() - started
        if built.returncode != 0:
            raise SystemExit(f"building {version} with {installer} failed:\n{(built.stdout + built.stderr)[-3000:]}")
        return seconds, installed_packages(Path(built.stdout.strip().splitlines()[-1]) / "bin" / "python")


def installed_packages(python: Path) -> dict[str, str]:
    """Name -> version, names normalised as PyPI compares them (uv and pip may spell one package differently)."""
    listed = subprocess.run([str(python), "-m", "pip", "list", "--format=json", "--disable-pip-version-check"],
                            check=True, capture_output=True, text=True)
    return {entry["name"].lower().replace("_", "-"): entry["version"] for entry in json.loads(listed.stdout)}


def differences(shipped: dict[str, str], baseline: dict[str, str]) -> str:
    """'none', or each package whose version differs or that only one build has."""
    changed = [f"{name} {shipped.get(name, '-')} / {baseline.get(name, '-')}"
               for name in sorted(shipped.keys() | baseline.keys()) if shipped.get(name) != baseline.get(name)]
    return "; ".join(changed) or "none"


def main() -> None:
    profiles = training_code_module("sagemaker_distributed/container_profiles.py")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    supported = profiles.supported_versions()
    # Checked below, not by `choices`: argparse refuses an empty list against choices (Python 3.11).
    parser.add_argument("framework_versions", nargs="*", metavar="FRAMEWORK_VERSION",
                        help=f"one of {', '.join(supported)}; default: the oldest and the newest")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--doc", type=Path, default=None, help="default: docs/benchmarks.md")
    args = parser.parse_args()
    versions = args.framework_versions or [supported[0], supported[-1]]
    for version in set(versions) - set(supported):
        parser.error(f"FRAMEWORK_VERSION {version} has no container profile; use one of {', '.join(supported)}")
    rows = []
    for version in versions:
        seconds: dict[str, list[float]] = {installer: [] for installer in INSTALLERS}
        packages: dict[str, dict[str, str]] = {}
        for repeat in range(args.repeats):
            order = list(INSTALLERS) if repeat % 2 == 0 else list(reversed(INSTALLERS))
            for installer in order:
                took, packages[installer] = build_from_empty_caches(version, installer)
                seconds[installer].append(took)
                print(f"{version} {installer}: {took:.0f} s", flush=True)
        baseline = statistics.median(seconds["pip"])
        name = profiles.profile_named(version).name
        for installer, label in INSTALLERS.items():
            build = statistics.median(seconds[installer])
            rows.append([name, label, f"{build:.0f}", f"{baseline / build:.2f}x", len(packages[installer]),
                         differences(packages[installer], packages["pip"])])
    table = markdown_table(["profile", "image packages installed by", "build from empty caches (s)",
                            "speed-up over pip", "packages", "differences from pip's build"], rows)
    print(table)
    body = (f"{provenance(machine_description('cpu'))}\n- Runs: each profile's whole environment build (virtual "
            f"environment, the image's packages, the toolkit's `pip install -r requirements.txt`, `pip check`) "
            f"with uv's, pip's and the environment cache empty; {args.repeats} build(s) per row (their median), "
            f"the two installers alternating\n\n{table}")
    write_section("container-env-build", "Building a container profile's environment", body,
                  **({"doc": args.doc} if args.doc else {}))


if __name__ == "__main__":
    main()
