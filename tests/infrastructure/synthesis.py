"""Synthesizes the app the way `cdk synth` does, for tests: cdk.json's context, a named environment, overrides."""

from __future__ import annotations

import json
import os
import re
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aws_cdk import App, Stack

from stacks.config import PipelineConfig, build_config
from stacks.pipeline_app import build_app, stack_names

PROJECT_ROOT = Path(__file__).resolve().parents[2]
# A small training folder that is not the project's: its own script and package, its own requirements.
FOREIGN_CODE = PROJECT_ROOT / "tests" / "fixtures" / "foreign_training_code"
CDK_CONTEXT: dict[str, Any] = json.loads((PROJECT_ROOT / "cdk.json").read_text())["context"]
# Plausible deployed values for the trigger's variables that are references in the template (resolved at deploy).
STAND_INS = {
    "DATA_BUCKET": "ranker-data-example", "ARTIFACTS_BUCKET": "ranker-artifacts-example",
    "ROLE_ARN": "arn:aws:iam::123456789012:role/ranker-sagemaker-execution",
    "SOURCE_BUNDLE_URI": "s3://ranker-artifacts-example/code/sourcedir.tar.gz",
    "OUTPUT_S3_URI": "s3://ranker-artifacts-example/models/",
    "CHECKPOINT_S3_URI": "s3://ranker-artifacts-example/checkpoints/",
    "KMS_KEY_ARN": "arn:aws:kms:us-east-1:123456789012:key/0a1b2c3d-0a1b-0a1b-0a1b-0a1b2c3d4e5f",
    "NOTIFICATION_TOPIC_ARN": "arn:aws:sns:us-east-1:123456789012:ranker-training",
    "TRAINING_IMAGE_URI": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.2.0-gpu-py310",
}


def make_synth(out_dir: Path, *context: str) -> subprocess.CompletedProcess:
    """`make synth ARGS="-c key=value ... --output OUT_DIR"` as a user runs it (its `setup` taken as done), with only
    the environment a user's shell would have: none of the settings the Makefile makes itself."""
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(("MAKE", "MFLAGS", "JSII_SILENCE_", "CDK_DISABLE_"))}
    arguments = " ".join([*(f"-c {pair}" for pair in context), "--output", str(out_dir)])
    return subprocess.run(["make", "--no-print-directory", "-o", "setup", "synth", f"ARGS={arguments}"],
                          cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=600)


def config_for(env_name: str, **overrides: Any) -> PipelineConfig:
    return build_config(env_name=env_name, defaults=CDK_CONTEXT["pipeline"], environments=CDK_CONTEXT["environments"],
                        overrides=overrides)


@dataclass(frozen=True)
class SynthesizedApp:
    config: PipelineConfig
    out_dir: Path
    stateful: dict[str, Any]
    stateless: dict[str, Any]

    @property
    def templates(self) -> dict[str, dict[str, Any]]:
        stateful_name, stateless_name = stack_names(self.config)
        return {stateful_name: self.stateful, stateless_name: self.stateless}


def feature_flags() -> dict[str, Any]:
    """cdk.json's feature flags: constructs behave in tests as in `cdk synth`."""
    return {key: value for key, value in CDK_CONTEXT.items() if key.startswith("@aws-cdk")}


def bare_stack() -> Stack:
    return Stack(App(context=feature_flags()), "Test")


def synthesize(config: PipelineConfig, work_dir: Path) -> SynthesizedApp:
    """Both stacks synthesized into `work_dir/cdk.out` (cdk-nag runs and raises on any finding)."""
    app = App(outdir=str(work_dir / "cdk.out"), context=feature_flags())
    stateful, stateless = build_app(app, config, build_dir=work_dir / "build")
    assembly = app.synth()
    return SynthesizedApp(
        config=config, out_dir=Path(assembly.directory),
        stateful=assembly.get_stack_by_name(stateful.stack_name).template,
        stateless=assembly.get_stack_by_name(stateless.stack_name).template,
    )


def resources_of_type(template: dict[str, Any], resource_type: str) -> dict[str, dict[str, Any]]:
    return {logical_id: resource for logical_id, resource in template["Resources"].items()
            if resource["Type"] == resource_type}


def trigger_function(template: dict[str, Any]) -> dict[str, Any]:
    """The trigger Lambda: the function whose Powertools service name is the trigger's."""
    return function_of_service(template, "training-trigger")


def function_of_service(template: dict[str, Any], service_name: str) -> dict[str, Any]:
    """The project's Lambda whose POWERTOOLS_SERVICE_NAME is `service_name` (both of ours run handler.lambda_handler)."""
    functions = [resource for resource in resources_of_type(template, "AWS::Lambda::Function").values()
                 if resource["Properties"].get("Environment", {}).get("Variables", {})
                 .get("POWERTOOLS_SERVICE_NAME") == service_name]
    assert len(functions) == 1, f"expected one function of service {service_name!r}, found {len(functions)}"
    return functions[0]


def trigger_asset_dir(app: SynthesizedApp) -> Path:
    """The trigger's staged asset folder in cdk.out."""
    return function_asset_dir(app, "training-trigger")


def function_asset_dir(app: SynthesizedApp, service_name: str) -> Path:
    """A function's staged asset folder in cdk.out, found by the function's code key."""
    asset_hash = function_of_service(app.stateless, service_name)["Properties"]["Code"]["S3Key"].removesuffix(".zip")
    asset_dir = app.out_dir / f"asset.{asset_hash}"
    assert asset_dir.is_dir(), f"the function's asset folder {asset_dir} is missing from cdk.out"
    return asset_dir


def source_bundle_in(out_dir: Path, template: dict[str, Any]) -> tarfile.TarFile:
    """The sourcedir.tar.gz asset the trigger's SOURCE_BUNDLE_URI points at, as cdk.out holds it."""
    uri = json.dumps(trigger_function(template)["Properties"]["Environment"]["Variables"]["SOURCE_BUNDLE_URI"])
    [object_key] = set(re.findall(r"[0-9a-f]{64}\.gz", uri))
    paths = {asset["source"]["path"] for manifest in out_dir.glob("*.assets.json")
             for asset in json.loads(manifest.read_text())["files"].values()
             if object_key in {destination["objectKey"] for destination in asset["destinations"].values()}}
    [path] = paths
    return tarfile.open(out_dir / path)


def synthesized_static_settings(app: SynthesizedApp) -> dict[str, Any]:
    """The settings file the synthesized function's environment names, read from its asset folder."""
    environment = trigger_function(app.stateless)["Properties"]["Environment"]["Variables"]
    return json.loads((trigger_asset_dir(app) / environment["STATIC_SETTINGS_FILE"]).read_text())
