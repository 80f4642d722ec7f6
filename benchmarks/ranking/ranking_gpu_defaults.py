"""The GPU tables behind the defaults sized for a GPU (docs/benchmarks.md, defaults sized for the hardware): the
tree-shaped data at the GPU size against LightGBM, the candidate configurations, the other datasets at the shipped
defaults, the fixed cost as the host is lent and with bytecode, and the throughput of the shipped GPU model.

    python3 -m benchmarks.ranking.ranking_gpu_defaults --work /tmp/gpu-defaults --out "$OUT"     # a GPU host: call it twice
    python -m benchmarks.ranking.ranking_gpu_defaults --smoke --work /tmp/smoke --out /tmp/smoke/out   # CPU, tiny sizes

A machine runs a command for at most 10 minutes, so each call runs the steps still missing, in order, and starts none
that its estimate says would end past `--budget` seconds; what finished is recorded in `--work` (each entry point's
and LightGBM's run too, so a step cut short resumes at its next run). Call it again until it prints
`ranking_gpu_defaults: done`: on the same warm machine with the same `--work`, or on a fresh one with
`--restore OUT/records.tar.gz` carried from the last call (the data is drawn again from its seeds; the runs recorded
are not run again). `--out` receives docs/benchmarks.md with every section written so far, its plot and
records.tar.gz.

Steps, in order (every run alone on the machine, unless it says side by side):
  trees-lightgbm ranker.data.synthetic_trees at the GPU size (10,000 training queries), LightGBM early-stopped
                 (patience 50 on the entry points' validation queries), as the host is lent
  trees-as-lent  train_ddp.py and train_lightning.py at their shipped defaults on that data, as the host is lent (no
                 bytecode for site-packages), beside that LightGBM run
  bytecode       site-packages and the standard library compiled into a cache (PYTHONPYCACHEPREFIX), as pip leaves an
                 installed package and the AWS training images hold them; every later step runs with it
  trees          both entry points at their shipped defaults again (the fixed cost with bytecode) and the candidates
                 (CANDIDATES), beside the first step's LightGBM run
  search, tanh, letor-sample   train_ddp.py at the shipped defaults and at the CPU's (today's defaults on a GPU before
                 they were sized for it), and train_lightning.py on the LETOR sample
  throughput     benchmarks.gpu.gpu_scaling: the shipped model and the plain MLP at the GPU width, batches of the GPU
                 default's 32 queries of 120 documents
  recipes        side by side: three seeds of the shipped defaults and their ensemble (benchmarks.ranking.ranking_recipes),
                 and the RECIPES

LightGBM is a wheel carried to the GPU host (it has no package index), with narwhals, which LightGBM 4.7 imports (NumPy
and SciPy, its other imports, come with torch's environment there); fetch them once, from the repository's root:
    python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \\
        --platform manylinux_2_28_x86_64 -d .whl-lightgbm lightgbm==4.7.0 narwhals==2.29.0
and carry `.whl-lightgbm` (git ignores it): the call installs every wheel there into `--work` (`--wheels`) and stops
before any step, naming what is missing, where LightGBM then does not import. The LETOR sample lives beside the
clone (../shared/data/letor-sample), which does not travel: copy it into `.device/letor-sample`, carry that folder and
set LETOR_SAMPLE_DIR=.device/letor-sample.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tarfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.harness.machine import SAFE_NCCL_ENV
from benchmarks.harness.project_code import TRAINING_CODE
from benchmarks.harness.report import BENCHMARKS_DOC
from benchmarks.ranking import ranking_quality
from ranker.config import HARDWARE_DEFAULTS

GPU_WIDTH = dict(HARDWARE_DEFAULTS["cuda"].values)["model.width"]
GPU_BATCH_QUERIES = dict(HARDWARE_DEFAULTS["cuda"].values)["train.batch_size"]


def cpu_values(flags_of: str) -> str:
    """The CPU's own values of the flags that the `flags_of` device's defaults replace, as a variant
    (`width=128,batch-size=0,...`): what a run on that device took before its defaults were sized for it."""
    cpu = HARDWARE_DEFAULTS["cpu"].config()
    values = []
    for key, _ in HARDWARE_DEFAULTS[flags_of].values:
        section, name = key.split(".", 1)
        values.append(f"{name.replace('_', '-')}={getattr(getattr(cpu, section), name)}")
    return ",".join(values)


CPU_DEFAULTS = cpu_values("cuda")
CANDIDATES = f"width=1024;{CPU_DEFAULTS}"
RECIPES = "width=4096;batch-size=64;learning-rate=0.001"
RECORDS = "records.tar.gz"


@dataclass(frozen=True)
class Step:
    name: str
    command: list[str]
    """Arguments after `python -m`."""
    estimate: float
    """Seconds it takes at the GPU size on one H200 with 16 cores, roughly: a call starts it only if it would end
    within the budget."""
    bytecode: bool = True
    """Runs with the compiled site-packages (every step after `bytecode`)."""
    must_succeed: bool = True
    """False where a failure leaves the step done as far as it goes (a file of site-packages that does not compile,
    test data in a package, is imported from source as before)."""


def plan(args: argparse.Namespace) -> list[Step]:
    """Every step, in order, with the sizes, device and paths of `args`."""
    work, doc = args.work, args.work / "benchmarks.md"
    size = (["--size", "cpu", "--queries", "200", "--docs-per-query", "4", "--features", "8", "--threads", "1",
             "--lightgbm-rounds", "5"] if args.smoke else ["--size", "gpu"])
    quality = ["benchmarks.ranking.ranking_quality", *size, "--device", args.device, "--doc", str(doc),
               "--letor-sample", str(args.letor_sample)]

    def ranking(section: str, title: str, folder: str, *flags: str) -> list[str]:
        return [*quality, "--work", str(work / folder), "--section", section, "--title", title, *flags]

    compile_folders = [str(TRAINING_CODE)] if args.smoke else [sysconfig.get_paths()["purelib"],
                                                               sysconfig.get_paths()["stdlib"]]
    throughput = (["--batch-size", "96", "--warmup-steps", "1", "--steps-per-window", "2", "--windows", "1",
                   "--widths", "16", "--shipped-width", "16"] if args.smoke else
                  ["--batch-size", str(GPU_BATCH_QUERIES * 120), "--windows", "3", "--widths", str(GPU_WIDTH),
                   "--shipped-width", str(GPU_WIDTH)])
    recipes = ([*size[:8], "--seeds", "0,1", "--parallel", "1", "--threads", "1"] if args.smoke else
               [*size, "--seeds", "0,1,2", "--parallel", "6", "--threads", "2"])
    # A smoke run trains the candidates as narrow as the rest of it.
    candidates, others = ((CANDIDATES, RECIPES) if not args.smoke else
                          (CANDIDATES.replace("width=1024", "width=32"), RECIPES.replace("width=4096", "width=32")))
    on_data = "The defaults sized for a GPU on {} (GPU size{})"
    as_lent = on_data.format("tree-shaped data", ", as lent")
    return [
        # LightGBM alone first: the longest run, recorded by itself, so a call cut short after it keeps it.
        Step("trees-lightgbm", ranking("defaults-gpu-trees-as-lent", as_lent, "as-lent", "--datasets", "trees",
                                       "--runs", "lightgbm"), 420, bytecode=False),
        # Measured on the H200: train_ddp.py alone took over 140 s at the shipped GPU defaults.
        Step("trees-as-lent", ranking("defaults-gpu-trees-as-lent", as_lent, "as-lent", "--datasets", "trees",
                                      "--runs", "lightgbm,native,lightning"), 360, bytecode=False),
        Step("bytecode", ["compileall", "-q", "-j", "0", *compile_folders], 60, must_succeed=False),
        Step("trees", ranking("defaults-gpu-trees", on_data.format("tree-shaped data", ", with bytecode: candidates"),
                              "bytecode", "--datasets", "trees", "--runs", "lightgbm,native,lightning", "--variants",
                              candidates), 240),
        *(Step(dataset, ranking(f"defaults-gpu-{dataset}", on_data.format(name, ""), "bytecode", "--datasets",
                                dataset, "--runs", runs, "--variants", CPU_DEFAULTS), estimate)
          for dataset, name, runs, estimate in (("search", "search-like data", "native", 100),
                                                ("tanh", "tanh data", "native", 110),
                                                ("letor-sample", "the LETOR sample", "native,lightning", 50))),
        Step("throughput", ["benchmarks.gpu.gpu_scaling", "--trainers", "native,lightning", "--gpu-counts", "1",
                            "--emulated-hosts", "0", *throughput, "--raw-dir", str(work / "throughput"),
                            "--section", "gpu-scaling-defaults", "--title",
                            "GPU throughput of the shipped GPU model against the plain MLP of its width", "--doc",
                            str(doc)], 100),
        Step("recipes", ["benchmarks.ranking.ranking_recipes", *recipes, "--device", args.device, "--dataset", "trees",
                         "--variants", others, "--variant-seeds", "0", "--work", str(work / "recipes"), "--doc",
                         str(doc), "--section", "recipe-defaults-gpu"], 300),
    ]


def share_trees_data(work: Path) -> None:
    """The later steps on the tree-shaped data take the first step's files (drawn from the same seeds, so the same
    data) instead of drawing them again, and the `trees` table compares with its LightGBM run, whose record is
    shared (LightGBM runs no Python of the project's, so bytecode would not change it)."""
    source = work / "as-lent" / "trees"
    if not (source / "recipe.json").exists():
        return
    for target in (work / "bytecode" / "trees", work / "recipes" / "trees"):
        if (target / "recipe.json").exists():
            continue
        (target / "results").mkdir(parents=True, exist_ok=True)
        for name in ("rank.train", "rank.test"):
            (target / name).unlink(missing_ok=True)
            os.link(source / name, target / name)
        for record in (source / "results").glob("lightgbm-*.json"):
            shutil.copy2(record, target / "results" / record.name)
        shutil.copy2(source / "recipe.json", target / "recipe.json")


def lightgbm_path(wheels: Path, work: Path, env: dict[str, str]) -> str | None:
    """A folder holding LightGBM and what it imports, installed from the carried wheels (every wheel in `wheels`),
    where this Python lacks it and LightGBM's wheel is there; None otherwise. Exits, with the import's error and the
    fix, where LightGBM installed so does not import (a wheel left out, a system library missing): before the first
    step, not at the step that runs it."""
    if _import_error(env) is None or not list(wheels.glob("lightgbm-*.whl")):
        return None
    target = work / "site"
    if not target.exists():
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                        "--target", str(target), *map(str, sorted(wheels.glob("*.whl")))], check=True)
    error = _import_error({**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(target), env.get("PYTHONPATH")]))})
    if error is not None:
        shutil.rmtree(target)  # a later call, given the missing wheel, installs them all again
        sys.exit(f"--wheels: LightGBM installed from {wheels} does not import ({error}): download its wheels again "
                 "with the command in this script's --help, which fetches the packages it imports beside it")
    return str(target)


def _import_error(env: dict[str, str]) -> str | None:
    """The last line of what `import lightgbm` raised in a fresh interpreter with `env`; None where it imports."""
    probe = subprocess.run([sys.executable, "-c", "import lightgbm"], env=env, capture_output=True, text=True,
                           check=False)
    return None if probe.returncode == 0 else (probe.stderr.strip().splitlines() or ["no error text"])[-1]


def save_records(work: Path, out: Path, doc: Path) -> None:
    """What a later call on a fresh machine needs to go on (every run's record, the steps done, the doc) and the doc
    and its plots to read now, into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    with tarfile.open(out / RECORDS, "w:gz") as archive:
        # Each dataset's recipe travels with its runs: the data drawn again from it keeps them (ranking_quality).
        for path in [*work.glob("*/*/results/*.json"), *work.glob("*/*/recipe.json"), *work.glob("steps/*"),
                     *work.glob("throughput/*.json*"), doc, *doc.parent.glob("benchmarks-*.png")]:
            if path.exists():
                archive.add(path, arcname=str(path.relative_to(work)))
    for path in [doc, *doc.parent.glob("benchmarks-*.png")]:
        shutil.copy2(path, out / path.name)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, required=True, help="folder for the data, runs and records")
    parser.add_argument("--out", type=Path, required=True, help="folder for the doc, its plots and records.tar.gz")
    parser.add_argument("--restore", type=Path, help="records.tar.gz of an earlier call on another machine")
    parser.add_argument("--budget", type=float, default=570.0,
                        help="seconds this call may run: no step starts that its estimate says would end later")
    parser.add_argument("--wheels", type=Path, default=Path(".whl-lightgbm"), help="folder holding LightGBM's wheel")
    parser.add_argument("--letor-sample", type=Path, default=ranking_quality.LETOR_SAMPLE,
                        help="folder holding the LETOR sample's rank.train (default: LETOR_SAMPLE_DIR)")
    parser.add_argument("--smoke", action="store_true", help="every step at a tiny size on the CPU")
    parser.add_argument("--steps", help="comma-separated steps to run (default: every step still missing)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    args.device = "cpu" if args.smoke else "cuda"
    if not (args.letor_sample / "rank.train").exists():
        parser.error(f"--letor-sample: {args.letor_sample} holds no rank.train: carry the LETOR sample and set "
                     "LETOR_SAMPLE_DIR (see --help)")
    args.work.mkdir(parents=True, exist_ok=True)
    if args.restore:
        with tarfile.open(args.restore) as archive:
            archive.extractall(args.work, filter="data")
    doc = args.work / "benchmarks.md"
    if not doc.exists():
        shutil.copy2(BENCHMARKS_DOC, doc)
    env = {**os.environ, **SAFE_NCCL_ENV, "PYTHONUNBUFFERED": "1"}
    site = lightgbm_path(args.wheels, args.work, env)
    if site:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [site, env.get("PYTHONPATH")]))
    steps = plan(args)
    chosen = args.steps.split(",") if args.steps else [step.name for step in steps]
    done_folder = args.work / "steps"
    done_folder.mkdir(exist_ok=True)
    pending = [step for step in steps if step.name in chosen and not (done_folder / step.name).exists()]
    # A call stopped by `timeout` (a step that outran its estimate) still keeps the runs its step finished; each
    # finished step is saved at once as well, for a call killed outright.
    signal.signal(signal.SIGTERM,
                  lambda *_: sys.exit(f"ranking_gpu_defaults: stopped; the finished runs are in {args.out}"))
    try:
        for step in pending:
            if time.perf_counter() - started + step.estimate > args.budget:
                break
            print(f"ranking_gpu_defaults: {step.name} ...", flush=True)
            step_env = {**env, **({"PYTHONPYCACHEPREFIX": str(args.work / "bytecode-cache")} if step.bytecode else {})}
            share_trees_data(args.work)
            subprocess.run([sys.executable, "-m", *step.command], env=step_env, check=step.must_succeed)
            (done_folder / step.name).write_text(json.dumps({"seconds": round(time.perf_counter() - started, 1)}))
            save_records(args.work, args.out, doc)
    finally:
        save_records(args.work, args.out, doc)
    missing = [step.name for step in steps if step.name in chosen and not (done_folder / step.name).exists()]
    print(f"ranking_gpu_defaults: {'done' if not missing else 'still to run: ' + ', '.join(missing)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
