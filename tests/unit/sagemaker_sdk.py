"""The real SageMaker Python SDK v2 as the conformance tests run it: offline, without telemetry, and without
re-checking its own config schema on every lookup."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

os.environ.setdefault("SAGEMAKER_SUPPRESS_V2_WARNING", "1")  # the SDK's v3 migration notice, on every estimator
sagemaker = pytest.importorskip("sagemaker", reason="the SageMaker Python SDK v2 is a test-only dependency")
import jsonschema  # noqa: E402  (the SDK's dependency)
from sagemaker.config import config_schema  # noqa: E402

# The SDK otherwise reports each fit() to an AWS telemetry endpoint.
SDK_CONFIG = {"SchemaVersion": "1.0", "SageMaker": {"PythonSDK": {"Modules": {"TelemetryOptOut": True}}}}
# The modules that imported the SDK's validate_sagemaker_config by name.
_VALIDATING_MODULES = ("sagemaker.config.config", "sagemaker.session", "sagemaker.utils")


@contextmanager
def config_validated_once_per_schema() -> Iterator[None]:
    """The SDK validates its config with `jsonschema.validate`, which first checks the SDK's schema against the
    JSON Schema meta-schema: 0.35 s, some twenty times per request built. Inside this, each config is still validated
    against that schema, by one validator whose schema was checked once."""
    validator = jsonschema.validators.validator_for(config_schema.SAGEMAKER_PYTHON_SDK_CONFIG_SCHEMA)
    validator.check_schema(config_schema.SAGEMAKER_PYTHON_SDK_CONFIG_SCHEMA)
    checked = validator(config_schema.SAGEMAKER_PYTHON_SDK_CONFIG_SCHEMA)

    def validate(sagemaker_config: dict[str, Any] | None = None) -> None:
        error = jsonschema.exceptions.best_match(checked.iter_errors(sagemaker_config))  # as jsonschema.validate
        if error is not None:
            raise error

    with pytest.MonkeyPatch.context() as patch:
        for module in _VALIDATING_MODULES:
            patch.setattr(f"{module}.validate_sagemaker_config", validate)
        yield
