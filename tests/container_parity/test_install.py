"""The bundle's requirements file installs in each container as the toolkit installs it, moving nothing the image
owns, and every module of the training code imports there."""

from __future__ import annotations

import json
import subprocess

from local_mode.container.container_envs import IMAGE_EXTRAS, WATCHED_PACKAGES, installed_versions, main
from local_mode.aws.synthesized_app import PROJECT_ROOT

TRAINING_CODE = PROJECT_ROOT / "training_code"
IMPORT_EVERY_TRAINING_MODULE = """
import importlib, json, pkgutil, traceback
import ranker, sagemaker_distributed
failures, imported = {}, []
for package in (ranker, sagemaker_distributed):
    for module in pkgutil.walk_packages(package.__path__, prefix=package.__name__ + "."):
        try:
            importlib.import_module(module.name)
            imported.append(module.name)
        except Exception:
            failures[module.name] = traceback.format_exc(limit=-1).strip().splitlines()[-1]
print(json.dumps({"failures": failures, "imported": imported}))
"""


def test_the_toolkits_install_command_succeeds(profile_env):
    _, env = profile_env
    install = env.record["install"]
    assert install["command"] == ["python", "-m", "pip", "install", "-r", "requirements.txt"]
    assert install["returncode"] == 0, install["output_tail"]


def test_the_images_torch_and_numpy_major_do_not_move(profile_env):
    profile, env = profile_env
    before, after = env.record["image_packages"], env.record["packages_after_install"]
    assert after == before == installed_versions(env.python, WATCHED_PACKAGES)
    assert after["torch"].split("+")[0] == profile.framework_version
    assert int(after["numpy"].split(".")[0]) == profile.numpy_major


def test_pip_check_is_clean(profile_env):
    _, env = profile_env
    assert env.record["pip_check"]["returncode"] == 0, env.record["pip_check"]["output"]


def test_every_training_code_module_imports(profile_env):
    _, env = profile_env
    result = subprocess.run([str(env.python), "-c", IMPORT_EVERY_TRAINING_MODULE], cwd=TRAINING_CODE,
                            capture_output=True, text=True, check=True, timeout=300)
    report = json.loads(result.stdout)
    assert report["failures"] == {}
    # the walk reached into the sub-packages, not only their folders
    assert {"ranker.data.letor_parser", "ranker.lightning.module", "sagemaker_distributed.lightning.strategy"} <= set(
        report["imported"])


def test_the_build_command_names_the_environment_the_jobs_run_in(profile_env, capsys):
    # Given a built environment, when the build command is asked for its framework version
    profile, env = profile_env
    returncode = main([profile.framework_version])
    # Then it builds nothing more and says where that environment lies
    assert returncode == 0
    assert capsys.readouterr().out == f"{profile.framework_version}: {env.root}\n"


def test_the_environments_toolkit_is_the_one_the_project_pins():
    pins = (PROJECT_ROOT / "requirements-dev.txt").read_text().split()
    toolkit = next(extra for extra in IMAGE_EXTRAS if extra.startswith("sagemaker-training=="))
    assert toolkit in pins
