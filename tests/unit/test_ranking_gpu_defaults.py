"""The GPU script of the defaults sized for a GPU, checked on CPU before a GPU call: every step's command is one its
benchmark takes, the steps share the tree-shaped data and LightGBM's run, a call stops at its budget and a later one
(on another machine, from the records) goes on, and the carried LightGBM wheels install or stop the call before any
step. Its steps' benchmarks are tested on their own; `--smoke` runs them all at a tiny size on CPU."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from benchmarks.gpu import gpu_scaling
from benchmarks.ranking import ranking_gpu_defaults, ranking_quality, ranking_recipes
from ranker.data import synthetic

BENCHMARK_MAINS = {"benchmarks.ranking.ranking_quality": ranking_quality.main,
                   "benchmarks.ranking.ranking_recipes": ranking_recipes.main, "benchmarks.gpu.gpu_scaling": gpu_scaling.main}


def _help_text(main) -> str:
    output = io.StringIO()
    with contextlib.redirect_stdout(output), pytest.raises(SystemExit):
        main(["--help"])
    return output.getvalue()


@pytest.mark.parametrize("smoke", [False, True])
def test_every_step_passes_only_flags_its_benchmark_takes_and_variants_it_can_read(tmp_path, smoke):
    steps = ranking_gpu_defaults.plan(argparse.Namespace(work=tmp_path, smoke=smoke, device="cuda",
                                                         letor_sample=tmp_path / "letor"))
    assert [step.name for step in steps] == ["trees-lightgbm", "trees-as-lent", "bytecode", "trees", "search", "tanh",
                                             "letor-sample", "throughput", "recipes"]
    helps = {module: _help_text(main) for module, main in BENCHMARK_MAINS.items()}
    for step in steps:
        module, *arguments = step.command
        if module == "compileall":
            continue
        flags = [argument for argument in arguments if argument.startswith("--")]
        assert flags and all(flag in helps[module] for flag in flags), (step.name, flags)
        if "--variants" in arguments:
            for variant in arguments[arguments.index("--variants") + 1].split(";"):
                ranking_quality.variant_flags(variant)
    # Only the first steps run without the compiled site-packages: the host as lent
    assert [step.name for step in steps if not step.bytecode] == ["trees-lightgbm", "trees-as-lent"]


def test_the_gpu_candidates_hold_the_cpu_defaults_as_todays_baseline():
    # What a GPU run took before its defaults were sized for it: each changed flag at its own default
    assert ranking_gpu_defaults.CPU_DEFAULTS == "width=128,batch-size=0,epochs=30,early-stopping=5"
    assert ranking_gpu_defaults.CPU_DEFAULTS in ranking_gpu_defaults.CANDIDATES.split(";")


def _write_trees_step(folder: Path) -> None:
    (folder / "results").mkdir(parents=True)
    (folder / "recipe.json").write_text(json.dumps({"dataset": "trees", "queries": 10}))
    for name in ("rank.train", "rank.test", "results/lightgbm-1.json", "results/native-1.json"):
        (folder / name).write_text(name)


def test_later_steps_take_the_first_steps_tree_data_and_its_lightgbm_run_only(tmp_path):
    _write_trees_step(tmp_path / "as-lent" / "trees")
    ranking_gpu_defaults.share_trees_data(tmp_path)
    for target in (tmp_path / "bytecode" / "trees", tmp_path / "recipes" / "trees"):
        # The same files (not copies), the same recipe, LightGBM's record: the data is not drawn again nor the peer run
        assert os.path.samefile(target / "rank.train", tmp_path / "as-lent" / "trees" / "rank.train")
        assert (target / "recipe.json").read_text() == (tmp_path / "as-lent" / "trees" / "recipe.json").read_text()
        # The entry points' runs are not shared: with bytecode they are measured again
        assert sorted(path.name for path in (target / "results").iterdir()) == ["lightgbm-1.json"]
    # A step that has its data already keeps it
    (tmp_path / "bytecode" / "trees" / "results" / "native-1.json").write_text("with bytecode")
    ranking_gpu_defaults.share_trees_data(tmp_path)
    assert (tmp_path / "bytecode" / "trees" / "results" / "native-1.json").read_text() == "with bytecode"


@pytest.fixture
def tiny_letor_sample(tmp_path) -> Path:
    return synthetic.write_letor(synthetic.generate(250, 4, 8, seed=3), tmp_path / "letor").parent


def _driver(tmp_path: Path, letor: Path, *flags: str) -> str:
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        assert ranking_gpu_defaults.main(["--smoke", "--work", str(tmp_path / "work"), "--out", str(tmp_path / "out"),
                                          "--letor-sample", str(letor), *flags]) == 0
    return output.getvalue()


def test_a_call_starts_no_step_past_its_budget_and_a_call_on_another_machine_goes_on_from_its_records(
        tmp_path, tiny_letor_sample):
    # A budget no step fits in: nothing runs, and the call says what is left
    said = _driver(tmp_path / "first", tiny_letor_sample, "--budget", "1", "--steps", "bytecode")
    assert said.strip().splitlines()[-1] == "ranking_gpu_defaults: still to run: bytecode"
    # With room for it the step runs and its record travels in records.tar.gz, beside the doc
    said = _driver(tmp_path / "first", tiny_letor_sample, "--budget", "100000", "--steps", "bytecode")
    assert said.strip().splitlines()[-1] == "ranking_gpu_defaults: done"
    out = tmp_path / "first" / "out"
    assert (out / "benchmarks.md").exists()
    with tarfile.open(out / ranking_gpu_defaults.RECORDS) as archive:
        assert "steps/bytecode" in archive.getnames()
    # A fresh machine, given the records, runs nothing that finished
    said = _driver(tmp_path / "second", tiny_letor_sample, "--budget", "100000", "--steps", "bytecode", "--restore",
                   str(out / ranking_gpu_defaults.RECORDS))
    assert said.strip().splitlines() == ["ranking_gpu_defaults: done"]


def test_a_missing_letor_sample_is_refused_before_any_step_with_the_fix(tmp_path, capsys):
    with pytest.raises(SystemExit):
        ranking_gpu_defaults.main(["--work", str(tmp_path / "work"), "--out", str(tmp_path / "out"),
                                   "--letor-sample", str(tmp_path / "absent")])
    assert "holds no rank.train: carry the LETOR sample and set LETOR_SAMPLE_DIR" in capsys.readouterr().err
    assert not (tmp_path / "work").exists()


def _wheel(folder: Path, name: str, source: str) -> Path:
    """A minimal wheel of package `name` (its `__init__.py` holding `source`): what pip installs from the carried
    folder."""
    folder.mkdir(exist_ok=True)
    path = folder / f"{name}-0.0.1-py3-none-any.whl"
    info = f"{name}-0.0.1.dist-info"
    files = {f"{name}/__init__.py": source,
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.0.1\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    files[f"{info}/RECORD"] = "".join(f"{file},,\n" for file in [*files, f"{info}/RECORD"])
    with zipfile.ZipFile(path, "w") as archive:
        for file, text in files.items():
            archive.writestr(file, text)
    return folder


def test_the_carried_lightgbm_wheels_are_installed_where_the_steps_import_them_or_the_call_stops_first(tmp_path):
    env = {**os.environ, "PYTHONPATH": ""}
    if subprocess.run([sys.executable, "-c", "import lightgbm"], env=env, capture_output=True).returncode == 0:
        pytest.skip("LightGBM is installed here: the wheels are only installed where it is missing")
    # No wheel carried: nothing to install
    assert ranking_gpu_defaults.lightgbm_path(tmp_path / "none", tmp_path / "work", env) is None
    # LightGBM's wheel without a package it imports (as LightGBM 4.7 imports narwhals): the call stops before any step,
    # with the import's error and the fix, and leaves nothing half installed for a later call
    wheels = _wheel(tmp_path / "wheels", "lightgbm", "import lightgbm_dependency\n__version__ = '0.0.1'\n")
    with pytest.raises(SystemExit) as stopped:
        ranking_gpu_defaults.lightgbm_path(wheels, tmp_path / "work", env)
    assert "No module named 'lightgbm_dependency'" in str(stopped.value)
    assert "download its wheels again with the command in this script's --help" in str(stopped.value)
    assert not (tmp_path / "work" / "site").exists()
    # With the package's wheel beside it: both installed into the work folder, LightGBM importable from it
    _wheel(wheels, "lightgbm_dependency", "")
    site = ranking_gpu_defaults.lightgbm_path(wheels, tmp_path / "work", env)
    probe = subprocess.run([sys.executable, "-c", "import lightgbm; print(lightgbm.__version__)"],
                           env={**env, "PYTHONPATH": site}, capture_output=True, text=True, check=True)
    assert probe.stdout.strip() == "0.0.1"
