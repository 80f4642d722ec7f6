"""The `model_trainer` launch's files in S3: the training code as loose files (the `code` channel) and, for each
script it can start and each of its two drivers, the `sm_drivers` channel SageMaker Python SDK v3's ModelTrainer
uploads for that script and driver.

What ModelTrainer uploads per job (`_create_training_job_args`, sagemaker-train's model_trainer.py), built here once
per deployment from the pinned SDK's own files (stacks/model_trainer_sdk.py): its container_drivers folder, its
`sm_train.sh` (templates.py's template, filled as `_prepare_train_script` fills it), `sourcecode.json` (the
`SourceCode(...)` a user would write for this stack) and `distributed.json` (`Torchrun()`, or `{}` without one).
tests/unit/trigger/test_model_trainer_conformance.py holds every file equal to what the real ModelTrainer uploads.

A CDK asset is one object (a folder is zipped), but a channel needs loose files: a BucketDeployment unpacks the
folder into the artifacts bucket under `model-trainer/<content hash>/`, a new prefix whenever a byte changes, so a
running job never sees files change under it (old prefixes are kept, as CDK keeps old assets).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as s3_assets
from aws_cdk import aws_s3_deployment as s3deploy
from constructs import Construct

from stacks.compliance import acknowledge, acknowledge_wildcards
from stacks.model_trainer_sdk import ModelTrainerSdk, model_trainer_sdk
from stacks.project_function import log_retention
from stacks.source_layout import EXCLUDED_NAMES, EXCLUDED_SUFFIXES, Member, member_content
from stacks.training_code_modules import training_code_module
from stacks.trigger_modules import trigger_module

profiles = training_code_module("sagemaker_distributed/container_profiles.py")
layout = trigger_module("model_trainer_layout.py")

REQUIREMENTS_FILE = "requirements.txt"
# What `SourceCode(ignore_patterns=...)` must leave out for its `code` channel to hold what sourcedir.tar.gz holds
# (stacks/source_layout.py).
IGNORE_PATTERNS = [*sorted(EXCLUDED_NAMES), *(f"*{suffix}" for suffix in EXCLUDED_SUFFIXES)]


def drivers_channel_files(sdk: ModelTrainerSdk, *, entry_script: str, distribution: str, source_dir: str,
                          requirements: str | None) -> dict[str, bytes]:
    """The files of ModelTrainer's `sm_drivers` channel for `SourceCode(source_dir=source_dir,
    entry_script=entry_script, requirements=requirements, ignore_patterns=IGNORE_PATTERNS)` and `distribution`'s
    driver, by path inside the channel."""
    constants, templates = sdk.constants, sdk.templates
    files = sdk.driver_files()
    if distribution == "torch_distributed":
        execute_driver = templates["EXEUCTE_DISTRIBUTED_DRIVER"].format(driver_name="Torchrun",
                                                                       driver_script="torchrun_driver.py")
        distributed = {"process_count_per_node": None, "smp": None}
    else:
        execute_driver, distributed = templates["EXECUTE_BASIC_SCRIPT_DRIVER"], {}
    install = templates["INSTALL_REQUIREMENTS"].format(requirements_file=requirements) if requirements else ""
    train_script = templates["TRAIN_SCRIPT_TEMPLATE"].format(
        working_dir=f"cd {constants['SM_CODE_CONTAINER_PATH']} \n", install_requirements=install,
        execute_driver=execute_driver)
    source_code = {"source_dir": source_dir, "requirements": requirements, "entry_script": entry_script,
                   "command": None, "args": None, "ignore_patterns": IGNORE_PATTERNS}
    files[constants["TRAIN_SCRIPT"]] = train_script.encode()
    files[constants["SOURCE_CODE_JSON"]] = json.dumps(source_code).encode()
    files[constants["DISTRIBUTED_JSON"]] = json.dumps(distributed).encode()
    return files


def launch_files(members: Mapping[str, Member], *, source_dir: str, sdk: ModelTrainerSdk) -> dict[str, bytes]:
    """Every file below the launch's prefix: `code/` (the bundle's files, a tracked stack's tracking requirements
    among them) and a drivers channel per script and driver."""
    files = {layout.code_folder() + name: member_content(member) for name, member in members.items()}
    requirements = REQUIREMENTS_FILE if REQUIREMENTS_FILE in members else None
    for script in profiles.model_trainer_scripts(members):
        for distribution, driver in profiles.MODEL_TRAINER_DRIVERS.items():
            channel = drivers_channel_files(sdk, entry_script=script, distribution=distribution,
                                            source_dir=source_dir, requirements=requirements)
            files |= {layout.drivers_folder(driver, script) + name: data for name, data in channel.items()}
    return dict(sorted(files.items()))


def model_trainer_settings(members: Mapping[str, Member], *, source_dir: str,
                           sdk: ModelTrainerSdk | None = None) -> dict[str, Any]:
    """What the trigger needs to send the launch's request (its settings file's `model_trainer`): the files' prefix,
    and the entrypoint and arguments the pinned SDK sends."""
    sdk = sdk or model_trainer_sdk()
    return {
        "prefix": content_prefix(launch_files(members, source_dir=source_dir, sdk=sdk)),
        "container_entrypoint": list(sdk.constants["DEFAULT_CONTAINER_ENTRYPOINT"]),
        "container_arguments": list(sdk.constants["DEFAULT_CONTAINER_ARGUMENTS"]),
    }


def content_prefix(files: Mapping[str, bytes]) -> str:
    """`model-trainer/<hash>/`: the same files give the same prefix, any changed byte or name a new one."""
    digest = hashlib.sha256()
    for name, data in sorted(files.items()):
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    return f"{layout.KEY_PREFIX}{digest.hexdigest()}/"


class ModelTrainerFiles(Construct):
    """The launch's files, unpacked into `bucket` at deployment; `settings` goes into the trigger's settings file."""

    def __init__(self, scope: Construct, construct_id: str, *, members: Mapping[str, Member], source_dir: str,
                 bucket: s3.IBucket, build_dir: Path, key: kms.IKey | None, log_retention_days: int,
                 removal_policy: RemovalPolicy) -> None:
        super().__init__(scope, construct_id)
        sdk = model_trainer_sdk()
        files = launch_files(members, source_dir=source_dir, sdk=sdk)
        self.prefix = content_prefix(files)
        self.bucket = bucket
        shutil.rmtree(build_dir, ignore_errors=True)
        for name, data in files.items():
            path = build_dir / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        staged = s3_assets.Asset(self, "StagedFiles", path=str(build_dir))
        # The handler's logs as the project's functions keep theirs: the project key, the configured retention.
        log_group = logs.LogGroup(self, "DeploymentLogGroup", retention=log_retention(log_retention_days),
                                  encryption_key=key, removal_policy=removal_policy)
        deployment = s3deploy.BucketDeployment(
            self, "Deployment", sources=[s3deploy.Source.bucket(staged.bucket, staged.s3_object_key)],
            destination_bucket=bucket, destination_key_prefix=self.prefix, retain_on_delete=True, log_group=log_group)
        self._acknowledge_handler(deployment, staged.bucket, bucket)
        self.settings = model_trainer_settings(members, source_dir=source_dir, sdk=sdk)

    def _acknowledge_handler(self, deployment: s3deploy.BucketDeployment, staging: s3.IBucket,
                             bucket: s3.IBucket) -> None:
        """CDK's BucketDeployment handler (one per stack, beside this construct) runs once per deployment."""
        handler = next(child for child in Stack.of(self).node.children
                       if child.node.id.startswith("Custom::CDKBucketDeployment"))
        acknowledge(handler, "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
                             "AWSLambdaBasicExecutionRole]",
                    "CDK's own BucketDeployment handler runs once per deployment to unpack the model_trainer "
                    "launch's files; AWSLambdaBasicExecutionRole only lets it write its own logs.")
        acknowledge(handler, "AwsSolutions-L1", "CDK's own BucketDeployment handler: CDK chooses its runtime and moves "
                                                "it with each CDK release.")
        acknowledge_wildcards(
            deployment.handler_role,
            reason="CDK's own BucketDeployment grants: read the staged asset in the CDK bootstrap bucket, write the "
                   "unpacked files into the artifacts bucket (CDK's read and write grant sets, with the project "
                   "key's where the bucket has one).",
            actions=["s3:GetObject*", "s3:GetBucket*", "s3:List*", "s3:DeleteObject*", "s3:Abort*",
                     *(["kms:GenerateDataKey*", "kms:ReEncrypt*"] if bucket.encryption_key is not None else [])],
            resources=[bucket.arn_for_objects("*"), staging.arn_for_objects("*")])

    def grant_read(self, grantee: iam.IGrantable) -> None:
        """Read the launch's files and list their prefix, as SageMaker does for an S3Prefix channel: this prefix and
        no other."""
        iam.Grant.add_to_principal(grantee=grantee, actions=["s3:GetObject"],
                                   resource_arns=[self.bucket.arn_for_objects(f"{self.prefix}*")])
        iam.Grant.add_to_principal(grantee=grantee, actions=["s3:ListBucket"], resource_arns=[self.bucket.bucket_arn],
                                   conditions={"StringLike": {"s3:prefix": f"{self.prefix}*"}})
        acknowledge_wildcards(grantee.grant_principal,
                              reason="The model_trainer launch's code and drivers channels: SageMaker reads every "
                                     "object below this deployment's own content-hash prefix",
                              resources=[self.bucket.arn_for_objects(f"{self.prefix}*")])
