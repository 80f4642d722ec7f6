#!/usr/bin/env python3
"""The CDK app: the only place that reads context. `npx cdk synth -c env=dev|prod [-c key=value ...]`."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from aws_cdk import App

from stacks.app_context import config_from_context as config_from_app_context
from stacks.config import ConfigError, PipelineConfig
from stacks.pipeline_app import build_app


def config_from_context(app: App) -> PipelineConfig:
    # `-c key=value` overrides any config key, on top of cdk.json's defaults and the named environment.
    return config_from_app_context(app.node.get_all_context())


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
