"""From the CDK app's whole context to the pipeline's configuration: cdk.json's `pipeline` defaults, the named
environment (`env`, from `environments`), then every `-c key=value` that names a configuration key.

The context also carries CDK's own keys (feature flags `@aws-cdk/...`, the CLI's `aws:cdk:...`, cached lookups such
as `availability-zones:account=...:region=...`, `acknowledged-issue-numbers`), each holding a character no
configuration key has. Any other plain key is a typo (`-c envv=prod`, `-c instance_cout=2`): it is refused with the
closest key, beside whatever else is wrong, instead of falling back to a default in silence.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from stacks.config import ConfigError, PipelineConfig, build_config, did_you_mean, refused

ENV_KEY = "env"
DEFAULT_ENV = "dev"
SECTION_KEYS = ("pipeline", "environments")
_PLAIN_KEY = re.compile(r"[a-z][a-z0-9_]*")


def configuration_keys() -> list[str]:
    """The keys `-c key=value` may set: the configuration's (its env_name is `env`)."""
    return [ENV_KEY, *(name for name in PipelineConfig.model_fields if name != "env_name")]


def unknown_key_problems(context: Mapping[str, Any]) -> list[str]:
    known = configuration_keys()
    return [f"-c {key}={value!r} is not a configuration key{did_you_mean(key, known)}: the keys are listed in "
            f"docs/configuration.md" for key, value in context.items()
            if _PLAIN_KEY.fullmatch(key) and key not in known and key not in SECTION_KEYS]


def config_from_context(context: Mapping[str, Any]) -> PipelineConfig:
    """The validated configuration; ConfigError listing every problem, unknown keys first."""
    problems = unknown_key_problems(context)
    overrides = {key: value for key, value in context.items()
                 if key in PipelineConfig.model_fields and key != "env_name" and value is not None}
    try:
        config = build_config(env_name=context.get(ENV_KEY) or DEFAULT_ENV, defaults=context.get("pipeline") or {},
                              environments=context.get("environments") or {}, overrides=overrides)
    except ConfigError as error:
        raise refused(problems + error.problems) from None
    if problems:
        raise refused(problems)
    return config
