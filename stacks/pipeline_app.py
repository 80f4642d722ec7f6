"""Builds the whole CDK app from a config: both stacks and cdk-nag. app.py and the tests share it."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import App, Environment, Tags, Validations
from cdk_nag import AwsSolutionsChecks

from stacks.compliance import skip_checkov_on_cdk_provided_functions
from stacks.config import PipelineConfig
from stacks.inference_image import resolve_inference_image
from stacks.stateful_stack import StatefulStack
from stacks.stateless_stack import StatelessStack
from stacks.training_image import resolve_dlc_image


def stack_names(config: PipelineConfig) -> tuple[str, str]:
    """Stateful and stateless stack names, e.g. `ranker-dev-stateful`, `ranker-dev-pipeline`."""
    base = f"{config.project_prefix}-{config.env_name}"
    return f"{base}-stateful", f"{base}-pipeline"


def build_app(app: App, config: PipelineConfig, *, build_dir: Path) -> tuple[StatefulStack, StatelessStack]:
    """Both stacks in `app`, checked by cdk-nag; `build_dir` receives the staged Lambda and training bundles."""
    # Region from config, account left to the deploying credentials: no account id in code or templates.
    environment = Environment(region=config.region)
    stateful_name, stateless_name = stack_names(config)
    export_prefix = f"{config.project_prefix}-{config.env_name}"
    stateful = StatefulStack(app, stateful_name, config=config, export_prefix=export_prefix, env=environment,
                             description=f"{config.project_prefix} training pipeline: key, buckets, image repository")
    stateless = StatelessStack(app, stateless_name, config=config, export_prefix=export_prefix, env=environment,
                               dlc_image=resolve_dlc_image(config) if config.image_source == "dlc" else None,
                               inference_image=resolve_inference_image(config),
                               build_dir=build_dir,
                               description=f"{config.project_prefix} training pipeline: trigger, roles, notifications")
    stateless.add_stack_dependency(stateful)
    for stack in (stateful, stateless):
        Tags.of(stack).add("project", config.project_prefix)
        Tags.of(stack).add("environment", config.env_name)
        skip_checkov_on_cdk_provided_functions(stack)
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return stateful, stateless
