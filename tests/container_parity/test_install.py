"""The bundle's requirements file installs in each container as the toolkit installs it, moving nothing the image
owns, and every module of the training code imports there, MLflow being absent. A tracked job's bundle installs there
too, adding MLflow's client and the SageMaker plugin, with which the training code logs a run."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from local_mode.aws.synthesized_app import PROJECT_ROOT
from local_mode.container.container_envs import (
    IMAGE_EXTRAS,
    WATCHED_PACKAGES,
    installed_versions,
    main,
    tracking_layer,
)

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
# The project's tracking code logs a run (to a file store: mlflow-skinny has no database store), and the plugin turns
# a managed MLflow ARN into SageMaker's MLflow endpoint, as MLflow finds it (its `mlflow.tracking_store` entry points).
LOG_A_TRACKED_RUN = """
import importlib.metadata, json, sys, tempfile
from ranker.training.tracking import TrackedRun, TrackingTarget
from sagemaker_mlflow.host_creds import get_host_creds
folder = tempfile.mkdtemp()
run = TrackedRun(TrackingTarget("file://" + folder, "ranker-web-search", "ranker-web-search-1", None, None))
run.log_parameters({"train.batch_size": "4"})
run.log_metrics({"step": 3, "val_ndcg@10": 0.5}, step=3)
run.finish({"val_ndcg@10": 0.5}, step=3, model_dir=folder)
logged = run.client.get_run(run.run_id)
stores = {point.name: point.value for point in importlib.metadata.entry_points(group="mlflow.tracking_store")}
print(json.dumps({"status": logged.info.status, "metrics": logged.data.metrics, "arn_store": stores.get("arn"),
                  "host": get_host_creds(sys.argv[1]).host}))
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


def test_an_untracked_job_gets_no_mlflow(profile_env):
    _, env = profile_env
    assert subprocess.run([str(env.python), "-m", "pip", "show", "--quiet", "mlflow-skinny"],
                          capture_output=True).returncode != 0


@pytest.fixture(scope="session")
def tracked_env(profile_env):
    """The profile's environment as a tracked job finds it (a layer built once beside it, about a minute)."""
    return tracking_layer(profile_env[1])


def test_a_tracked_jobs_install_succeeds_and_moves_nothing_the_image_owns(profile_env, tracked_env):
    profile, env = profile_env
    install = tracked_env.record["install"]
    assert install["command"] == ["python", "-m", "pip", "install", "-r", "requirements.txt"]
    assert install["returncode"] == 0, install["output_tail"]
    assert (tracked_env.root / "code" / "requirements.txt").read_text().splitlines()[-1] == (
        "-r requirements-tracking.txt")
    assert tracked_env.record["packages_after_install"] == env.record["image_packages"]
    assert tracked_env.record["pip_check"]["returncode"] == 0, tracked_env.record["pip_check"]["output"]


def test_a_tracked_job_logs_its_run_through_the_installed_client(tracked_env):
    arn = "arn:aws:sagemaker:us-east-1:123456789012:mlflow-tracking-server/ranking"
    result = subprocess.run([str(tracked_env.python), "-c", LOG_A_TRACKED_RUN, arn], cwd=TRAINING_CODE,
                            env={**os.environ, "MLFLOW_ALLOW_FILE_STORE": "true"}, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["status"] == "FINISHED"
    assert report["metrics"] == {"val_ndcg_at_10": 0.5, "final_val_ndcg_at_10": 0.5}
    assert report["arn_store"] == "sagemaker_mlflow.mlflow_sagemaker_store:MlflowSageMakerStore"
    assert report["host"] == "https://us-east-1.experiments.sagemaker.aws"


def test_the_build_command_names_the_environment_the_jobs_run_in(profile_env, capsys):
    # Given a built environment, when the build command is asked for its framework version
    profile, env = profile_env
    returncode = main([profile.framework_version])
    # Then it builds nothing more and says where that environment lies
    assert returncode == 0
    assert capsys.readouterr().out == f"{profile.framework_version}: {env.root}\n"


def test_the_build_command_names_the_tracking_layer_when_asked(profile_env, tracked_env, capsys):
    profile, env = profile_env
    assert main(["--tracking", profile.framework_version]) == 0
    assert capsys.readouterr().out == (f"{profile.framework_version}: {env.root}\n"
                                       f"{profile.framework_version} tracked: {tracked_env.root}\n")


def test_the_environments_toolkit_is_the_one_the_project_pins():
    pins = (PROJECT_ROOT / "requirements-dev.txt").read_text().split()
    toolkit = next(extra for extra in IMAGE_EXTRAS if extra.startswith("sagemaker-training=="))
    assert toolkit in pins
