"""The model_trainer launch's files: read from the pinned SDK v3 at synthesis, unpacked by a BucketDeployment under
the prefix the trigger is given, readable by the execution role there and nowhere else."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from aws_cdk import RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Template

from stacks.model_trainer_files import ModelTrainerFiles, launch_files
from stacks.model_trainer_sdk import SDK3_VENV, SdkUnavailable, installed_package, model_trainer_sdk
from stacks.source_layout import PROJECT_ROOT, bundle_members

from .iam_policy import allows, resolve
from .synthesis import bare_stack, resources_of_type, synthesized_static_settings

MEMBERS = bundle_members(PROJECT_ROOT / "training_code")
BUCKET_ARN = "arn:aws:s3:::ranker-artifacts-example"


def test_the_deployment_unpacks_the_files_where_the_trigger_points_its_channels(dev_app) -> None:
    # Given the synthesized app / When the trigger's settings and the deployment are read
    prefix = synthesized_static_settings(dev_app)["model_trainer"]["prefix"]
    [deployment] = resources_of_type(dev_app.stateless, "Custom::CDKBucketDeployment").values()
    # Then the files land under the prefix the trigger sends, in the artifacts bucket, and stay when it changes
    assert deployment["Properties"]["DestinationBucketKeyPrefix"] == prefix
    assert deployment["Properties"]["DestinationBucketName"] == {"Fn::ImportValue": "ranker-dev-ArtifactsBucketName"}
    assert deployment["Properties"]["RetainOnDelete"] is True
    assert prefix.startswith("model-trainer/") and len(prefix) == len("model-trainer/") + 64 + 1


def test_the_execution_role_reads_and_lists_that_prefix_only(tmp_path: Path) -> None:
    # Given the construct in a bare stack with a role that will run the jobs
    stack = bare_stack()
    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    files = ModelTrainerFiles(stack, "Files", members=MEMBERS, source_dir="training_code",
                              bucket=s3.Bucket.from_bucket_arn(stack, "Artifacts", BUCKET_ARN),
                              build_dir=tmp_path / "model-trainer", key=None, log_retention_days=30,
                              removal_policy=RemovalPolicy.DESTROY)
    files.grant_read(role)
    template = Template.from_stack(stack)
    statements = [resolve(statement, region="us-east-1")
                  for logical_id, policy in template.find_resources("AWS::IAM::Policy").items()
                  if logical_id.startswith("RoleDefaultPolicy")
                  for statement in policy["Properties"]["PolicyDocument"]["Statement"]]
    # When SageMaker reads the code and drivers channels as the role / Then it may, and nothing beside them
    assert allows(statements, "s3:GetObject", f"{BUCKET_ARN}/{files.prefix}code/train_ddp.py")
    assert allows(statements, "s3:ListBucket", BUCKET_ARN, {"s3:prefix": f"{files.prefix}sm_drivers/torchrun/"})
    assert not allows(statements, "s3:GetObject", f"{BUCKET_ARN}/model-trainer/{'0' * 64}/code/train_ddp.py")
    assert not allows(statements, "s3:ListBucket", BUCKET_ARN, {"s3:prefix": "models/"})
    assert not allows(statements, "s3:PutObject", f"{BUCKET_ARN}/{files.prefix}code/train_ddp.py")
    # And the staged folder is what is unpacked there
    assert sorted(path.relative_to(tmp_path / "model-trainer").as_posix()
                  for path in (tmp_path / "model-trainer").rglob("*") if path.is_file()) == \
        sorted(launch_files(MEMBERS, source_dir="training_code", sdk=model_trainer_sdk()))


def test_each_top_level_script_has_both_drivers_channels() -> None:
    # Given the project's training code / When the launch's files are laid out
    files = launch_files(MEMBERS, source_dir="training_code", sdk=model_trainer_sdk())
    # Then the code is there as loose files, and each entry point has ModelTrainer's channel for each driver
    assert files["code/train_ddp.py"] == (PROJECT_ROOT / "training_code" / "train_ddp.py").read_bytes()
    for script in ("train_ddp.py", "train_lightning.py"):
        torchrun = files[f"sm_drivers/torchrun/{script}/sm_train.sh"].decode()
        basic = files[f"sm_drivers/basic/{script}/sm_train.sh"].decode()
        assert "distributed_drivers/torchrun_driver.py" in torchrun and "torchrun_driver" not in basic
        assert "basic_script_driver.py" in basic
        # requirements.txt is installed before the script runs, as the toolkit launch installs it
        assert "install_requirements.py requirements.txt" in torchrun
        assert f'"entry_script": "{script}"' in files[f"sm_drivers/basic/{script}/sourcecode.json"].decode()
    assert not any(name.startswith("sm_drivers/") and name.split("/")[2] not in ("train_ddp.py", "train_lightning.py")
                   for name in files)


def _copy_of_the_side_environment(target: Path) -> Path:
    """The side environment's sagemaker-train distribution (RECORD and the package), copied under `target`."""
    train = installed_package("sagemaker-train")
    site = target / train.site_packages.relative_to(SDK3_VENV)
    for name in train.files_under("sagemaker/train/container_drivers"):
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(train.site_packages / name, site / name)
    [dist_info] = train.site_packages.glob(f"sagemaker_train-{train.version}.dist-info")
    shutil.copytree(dist_info, site / dist_info.name)
    return target


def test_a_driver_file_that_is_not_the_releases_is_refused(tmp_path: Path) -> None:
    # Given a copy of the side environment in which one driver was edited
    venv = _copy_of_the_side_environment(tmp_path / "venv")
    driver = "sagemaker/train/container_drivers/distributed_drivers/torchrun_driver.py"
    site = venv / installed_package("sagemaker-train").site_packages.relative_to(SDK3_VENV)
    with open(site / driver, "a") as edited:
        edited.write("# changed\n")
    # When synthesis reads it / Then it is refused, saying how to get the release back
    package = installed_package("sagemaker-train", venv=venv)
    with pytest.raises(SdkUnavailable, match="differs from sagemaker-train 1.27.0's release: rebuild"):
        package.read(driver)


def test_a_missing_side_environment_says_how_to_build_it(tmp_path: Path) -> None:
    with pytest.raises(SdkUnavailable, match=r"has no sagemaker-train: run `make setup`"):
        installed_package("sagemaker-train", venv=tmp_path / "missing")
