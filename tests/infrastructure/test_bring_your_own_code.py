"""The stack takes the user's code: any source folder and script, extra dependency folders, their own metrics.

The folder under tests/fixtures/ was written without this project in mind; the bundle is read back from what
synthesis leaves in cdk.out, the way `cdk deploy` would upload it.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from stacks.config import ConfigError
from stacks.pipeline_app import stack_names

from .synthesis import FOREIGN_CODE, PROJECT_ROOT, SynthesizedApp, config_for, make_synth, source_bundle_in, \
    synthesized_static_settings

SERVER_ARN = "arn:aws:sagemaker:us-east-1:123456789012:mlflow-tracking-server/ranking"
TRACKING_FILE = PROJECT_ROOT / "training_code" / "requirements-tracking.txt"

FOREIGN_LIBRARY = PROJECT_ROOT / "tests" / "fixtures" / "foreign_library" / "metrics_lib"
FOREIGN_METRICS = [{"Name": "loss", "Regex": r"loss: ([0-9.]+)"}]


def _files_under(folder: Path, prefix: str = "") -> set[str]:
    return {prefix + path.relative_to(folder).as_posix() for path in folder.rglob("*")
            if path.is_file() and "__pycache__" not in path.parts}


def _generic_package(root: Path) -> Path:
    """A dependency folder named like the project's generic package, outside any source folder."""
    package = root / "libs" / "sagemaker_distributed"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('"""Process topology and backend choice for any training script."""\n')
    (package / "topology.py").write_text("import os\n\n\ndef world_size() -> int:\n"
                                         "    return int(os.environ.get('WORLD_SIZE', '1'))\n")
    return package


@pytest.fixture
def generic_package(tmp_path: Path) -> Path:
    return _generic_package(tmp_path)


@dataclass(frozen=True)
class ForeignSynth:
    """`make synth` of a foreign source folder, its script, two dependency folders, its own metrics and
    hyperparameters: what the command printed and the app it left in cdk.out."""
    result: subprocess.CompletedProcess
    app: SynthesizedApp


@pytest.fixture(scope="module")
def foreign_synth(tmp_path_factory: pytest.TempPathFactory) -> ForeignSynth:
    # One synthesis for every test of a foreign folder: the CLI's (a user's `make synth`) is the one that must print
    # no noise, and its cdk.out holds what an in-process synthesis of the same settings would (~15 s of CPU each).
    work = tmp_path_factory.mktemp("byo")
    package = _generic_package(work)
    settings = {"source_dir": str(FOREIGN_CODE), "entry_point": "train.py",
                "dependencies": [str(package), str(FOREIGN_LIBRARY.relative_to(PROJECT_ROOT))],
                "metric_definitions": FOREIGN_METRICS, "default_hyperparameters": {"lr": 0.1}}
    result = make_synth(work / "cdk.out", f"source_dir={FOREIGN_CODE}", "entry_point=train.py",
                        f"dependencies={','.join(settings['dependencies'])}",
                        f"metric_definitions='{json.dumps(FOREIGN_METRICS)}'",
                        f"default_hyperparameters='{json.dumps(settings['default_hyperparameters'])}'")
    assert result.returncode == 0, result.stderr[-3000:]
    config = config_for("dev", **settings)
    templates = [json.loads((work / "cdk.out" / f"{name}.template.json").read_text()) for name in stack_names(config)]
    return ForeignSynth(result, SynthesizedApp(config, work / "cdk.out", *templates))


@pytest.fixture(scope="module")
def foreign_app(foreign_synth: ForeignSynth) -> SynthesizedApp:
    return foreign_synth.app


def test_the_bundle_holds_the_source_folder_at_its_root_and_each_dependency_beside_it(foreign_app) -> None:
    # Given the app synthesized with a foreign source folder and two dependency folders
    # When the uploaded archive is read back
    with source_bundle_in(foreign_app.out_dir, foreign_app.stateless) as bundle:
        names = {member.name for member in bundle.getmembers() if member.isfile()}
        script = bundle.extractfile("train.py").read()
        requirements = bundle.extractfile("requirements.txt").read()
    # Then it holds the folder's files at the root and each dependency under its own folder name, nothing else
    generic_package = PROJECT_ROOT / foreign_app.config.dependencies[0]
    assert names == (_files_under(FOREIGN_CODE) | _files_under(generic_package, "sagemaker_distributed/")
                     | _files_under(FOREIGN_LIBRARY, "metrics_lib/"))
    assert script == (FOREIGN_CODE / "train.py").read_bytes()
    # and, the stack tracking no experiments, the folder's own requirements as they are
    assert requirements == (FOREIGN_CODE / "requirements.txt").read_bytes()


def test_the_trigger_gets_the_bundles_files_the_users_metrics_and_no_ranker_flag_checks(foreign_app) -> None:
    static = synthesized_static_settings(foreign_app)
    with source_bundle_in(foreign_app.out_dir, foreign_app.stateless) as bundle:
        assert static["bundle_files"] == sorted(member.name for member in bundle.getmembers() if member.isfile())
    assert static["default_entry_point"] == "train.py"
    assert static["metric_definitions"] == FOREIGN_METRICS
    # A foreign script's hyperparameters are its own business: no flag definitions, passed through as given
    assert (static["checked_entry_points"], static["training_flags"]) == ([], {})
    assert static["default_hyperparameters"] == {"lr": 0.1}


def test_a_dependency_already_inside_the_source_folder_is_packed_once() -> None:
    # Given the project's own training code with one of its own folders named as a dependency too
    config = config_for("dev", dependencies=["training_code/ranker"])
    # When the bundle's files are listed / Then each file appears once, under its place in the source folder
    members = config.source_members()
    assert "ranker/config.py" in members
    assert sorted(members) == sorted(_files_under(PROJECT_ROOT / "training_code") - {"Dockerfile"})


def _tracked_members(source_dir: Path, entry_point: str = "train.py") -> dict:
    return config_for("dev", source_dir=str(source_dir), entry_point=entry_point, dependencies=[],
                      mlflow_resource_arn=SERVER_ARN).source_members()


def test_a_tracked_stack_extends_the_users_requirements_with_the_tracking_file() -> None:
    # Given a source folder with its own requirements.txt, in a stack that tracks experiments
    # When the bundle's files are listed
    members = _tracked_members(FOREIGN_CODE)
    # Then its requirements are kept and end by naming the tracking file, which travels beside them
    own = (FOREIGN_CODE / "requirements.txt").read_bytes()
    requirements = members["requirements.txt"]
    assert requirements.startswith(own)
    assert requirements.splitlines()[-1] == b"-r requirements-tracking.txt"
    assert members["requirements-tracking.txt"].read_bytes() == TRACKING_FILE.read_bytes()
    assert set(members) == _files_under(FOREIGN_CODE) | {"requirements-tracking.txt"}


def test_a_tracked_stack_gives_a_folder_without_requirements_a_file_naming_the_tracking_file(tmp_path) -> None:
    source = tmp_path / "code"
    source.mkdir()
    (source / "train.py").write_text("print('train')\n")
    members = _tracked_members(source)
    assert [line for line in members["requirements.txt"].splitlines() if not line.startswith(b"#")] == [
        b"-r requirements-tracking.txt"]


def test_a_last_requirement_without_a_line_end_stays_a_line_of_its_own(tmp_path) -> None:
    source = tmp_path / "code"
    source.mkdir()
    (source / "train.py").write_text("print('train')\n")
    (source / "requirements.txt").write_text("lightning==2.6.6")
    lines = _tracked_members(source)["requirements.txt"].splitlines()
    assert lines[0] == b"lightning==2.6.6" and lines[-1] == b"-r requirements-tracking.txt"


def test_a_users_own_tracking_file_is_refused_naming_it(tmp_path) -> None:
    # Given a source folder with a requirements-tracking.txt that is not the pipeline's
    source = tmp_path / "code"
    source.mkdir()
    (source / "train.py").write_text("print('train')\n")
    (source / "requirements-tracking.txt").write_text("mlflow==2.0.0\n")
    # When a tracked stack is configured with it / Then synthesis refuses, naming the file and the fix
    with pytest.raises(ConfigError, match=r"holds a requirements-tracking.txt of its own .*: rename that file"):
        _tracked_members(source)


def test_the_projects_own_code_gets_the_line_when_tracked_and_not_otherwise() -> None:
    untracked = config_for("dev").source_members()
    tracked = config_for("dev", mlflow_resource_arn=SERVER_ARN).source_members()
    # Untracked: training_code/requirements.txt as it is, which names no MLflow package
    own = PROJECT_ROOT / "training_code" / "requirements.txt"
    assert untracked["requirements.txt"] == own
    assert b"mlflow" not in own.read_bytes().lower()
    # Tracked: the same lines, then the one naming the tracking file, which the folder holds already
    assert tracked["requirements.txt"].startswith(own.read_bytes())
    assert tracked["requirements.txt"].splitlines()[-1] == b"-r requirements-tracking.txt"
    assert set(tracked) == set(untracked)


def test_the_generic_package_is_the_default_dependency() -> None:
    assert config_for("dev").dependencies == ("training_code/sagemaker_distributed",)


@pytest.mark.parametrize(("overrides", "named"), [
    ({"source_dir": str(FOREIGN_CODE), "entry_point": "train_ddp.py"},
     ["entry_point='train_ddp.py' is not a file of source_dir=", "-c entry_point=", "['train.py']"]),
    ({"source_dir": str(FOREIGN_CODE), "entry_point": "../train.py"}, ["entry_point='../train.py'"]),
    ({"source_dir": "no/such/folder", "entry_point": "train.py"}, ["source_dir=", "no/such/folder", "is not a folder"]),
    ({"dependencies": ["no/such/library"]}, ["dependencies:", "no/such/library", "is not a folder"]),
    ({"metric_definitions": [{"Name": "loss"}]}, ["metric_definitions.0.Regex"]),
    ({"metric_definitions": [{"Name": f"m{i}", "Regex": "(x)"} for i in range(41)]}, ["metric_definitions",
                                                                                        "at most 40"]),
])
def test_bad_code_settings_are_refused_naming_the_key_and_the_fix(overrides, named) -> None:
    with pytest.raises(ConfigError) as raised:
        config_for("dev", **overrides)
    for text in named:
        assert text in str(raised.value)


def test_a_dependency_named_like_a_source_folder_entry_is_refused(generic_package, tmp_path) -> None:
    # Given a source folder that has its own sagemaker_distributed folder, and another one as a dependency
    source = tmp_path / "code"
    (source / "sagemaker_distributed").mkdir(parents=True)
    (source / "train.py").write_text("print('train')\n")
    # When it is validated / Then synthesis refuses to let one shadow the other, naming both
    with pytest.raises(ConfigError, match=r"would be packed as sagemaker_distributed/, which .*code/sagemaker_"
                                          r"distributed' already is: rename one of the folders"):
        config_for("dev", source_dir=str(source), entry_point="train.py", dependencies=[str(generic_package)])


def test_two_dependencies_with_one_folder_name_are_refused(generic_package, tmp_path) -> None:
    # Given two different folders that would both be packed as sagemaker_distributed/
    other = tmp_path / "vendored" / "sagemaker_distributed"
    other.mkdir(parents=True)
    # When they are validated / Then the second is refused, naming the first
    with pytest.raises(ConfigError, match=rf"'{other}' would be packed as sagemaker_distributed/, which "
                                          rf"'{generic_package}' already is"):
        config_for("dev", source_dir=str(FOREIGN_CODE), entry_point="train.py",
                   dependencies=[str(generic_package), str(other)])


# Lines that only bury synthesis's own output: jsii's Node end-of-life banner (printed as the bytes' repr), and the
# SageMaker SDK's config-file lookups and v2 deprecation notice when synthesis reads its image tables.
NOISE = re.compile(r"^b'|end-of-life|sagemaker\.config|SageMaker Python SDK v2", re.MULTILINE)


@pytest.mark.slow  # the CDK CLI synthesizes the whole app (tens of seconds)
def test_make_synth_takes_a_source_folder_outside_training_code_and_prints_no_noise(foreign_synth) -> None:
    # Given `make synth ARGS="-c source_dir=<a folder outside training_code> -c entry_point=<its script> ..."`, which
    # synthesized (the fixture checks its exit; the tests above read its bundle and settings)
    # Then it prints synthesis's own lines only: no banner, no raw bytes, no SDK notices
    printed = foreign_synth.result.stdout + foreign_synth.result.stderr
    assert not NOISE.findall(printed), printed
    assert "Successfully synthesized" in printed


@pytest.mark.slow
def test_cdk_synth_refuses_a_missing_entry_point_naming_the_key_and_the_fix(generic_package, tmp_path) -> None:
    result = make_synth(tmp_path / "cdk.out", f"source_dir={FOREIGN_CODE}", "entry_point=main.py",
                         f"dependencies={generic_package}")
    assert result.returncode != 0
    assert "entry_point='main.py' is not a file of source_dir=" in result.stderr
    assert "give the path of the training script inside source_dir" in result.stderr
