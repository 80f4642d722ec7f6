"""The environment the stack sets (stacks/job_watchdog.py), read once into a frozen, validated `Settings`."""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta


class SettingsError(ValueError):
    def __init__(self, errors: list[str]):
        super().__init__("invalid watchdog environment: " + "; ".join(errors))
        self.errors = errors


@dataclass(frozen=True)
class Settings:
    project_prefix: str  # training jobs `<prefix>-*` are the project's, and the only ones watched
    stall: timedelta  # how long a training job's logs may stay silent before it is stopped
    training_log_group: str  # where SageMaker writes every training job's log streams
    notification_topic_arn: str


def settings_from_environ(environ: Mapping[str, str]) -> Settings:
    errors = []

    def required(name: str) -> str:
        value = environ.get(name, "")
        if not value:
            errors.append(f"{name} is missing: set it in the stack's Lambda environment")
        return value

    stall_text = required("STALL_SECONDS")
    stall = timedelta(0)
    if stall_text:
        if stall_text.isdigit() and int(stall_text) > 0:
            stall = timedelta(seconds=int(stall_text))
        else:
            errors.append(f"STALL_SECONDS={stall_text!r} is not a positive whole number of seconds: set e.g. 3600 "
                          "(stall_minutes in the stack's configuration)")
    settings = Settings(project_prefix=required("PROJECT_PREFIX"), stall=stall,
                        training_log_group=required("TRAINING_LOG_GROUP"),
                        notification_topic_arn=required("NOTIFICATION_TOPIC_ARN"))
    if errors:
        raise SettingsError(errors)
    return settings


@functools.cache
def load_settings() -> Settings:
    """The running function's settings, read once per execution environment."""
    return settings_from_environ(os.environ)
