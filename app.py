#!/usr/bin/env python3
"""The CDK app: the only place that reads context. `npx cdk synth -c env=dev|prod [-c key=value ...]`."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from aws_cdk import App

from stacks.config import PipelineConfig, ConfigError, build_config
from stacks.pipeline_app import build_app


def config_from_context(app: App) -> PipelineConfig:
    node = app.node
    defaults = node.try_get_context("pipeline") or {}
    # `-c key=value` overrides any config key, on top of cdk.json's defaults and the named environment.
    overrides = {key: node.try_get_context(key) for key in PipelineConfig.model_fields
                 if key != "env_name" and node.try_get_context(key) is not None}
    return build_config(env_name=node.try_get_context("env") or "dev", defaults=defaults,
                        environments=node.try_get_context("environments") or {}, overrides=overrides)


def main() -> None:
    app = App()
    # Each synthesis stages its bundles in a folder of its own until they are copied into the assembly: two at once
    # (`cdk synth` beside a local-mode run, two test workers) would otherwise rebuild one folder under each other.
    with tempfile.TemporaryDirectory(prefix="cdk-bundles-") as build_dir:
        try:
            config = config_from_context(app)
            build_app(app, config, build_dir=Path(build_dir))
        except ConfigError as error:
            sys.exit(f"cdk synth refused the configuration: {error}")
        app.synth()


if __name__ == "__main__":
    main()
