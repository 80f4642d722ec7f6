"""The stack's environment becomes frozen Settings; every bad variable is named with its fix."""

from __future__ import annotations

import dataclasses

import pytest
from training_trigger.settings import SettingsError, settings_from_environ

from trigger.sample_inputs import stack_environ


def test_stack_environment_parses_into_typed_settings():
    # Given the environment the stack sets, with a VPC and KMS
    environ = stack_environ(SUBNET_IDS="subnet-0a1b,subnet-2c3d", SECURITY_GROUP_IDS="sg-0f1e",
                            KMS_KEY_ARN="arn:aws:kms:eu-west-1:123456789012:key/1234abcd", USE_SPOT="true")
    # When it is read
    settings = settings_from_environ(environ)
    # Then lists, numbers, flags and JSON arrive typed
    assert settings.subnet_ids == ("subnet-0a1b", "subnet-2c3d")
    assert settings.security_group_ids == ("sg-0f1e",)
    assert settings.kms_key_arn == environ["KMS_KEY_ARN"]
    assert settings.use_spot is True
    assert settings.default_instance_count == int(environ["DEFAULT_INSTANCE_COUNT"])
    assert settings.marker_names == ("_SUCCESS", "manifest.json")
    assert settings.default_hyperparameters == {"epochs": 10, "loss": "listnet"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.role_arn = "changed"


def test_empty_kms_key_means_no_kms():
    assert settings_from_environ(stack_environ(KMS_KEY_ARN="")).kms_key_arn is None


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("DEFAULT_DISTRIBUTION", "horovod", "DEFAULT_DISTRIBUTION='horovod' is not one of"),
        ("DEFAULT_INSTANCE_COUNT", "two", "DEFAULT_INSTANCE_COUNT='two' is not an integer"),
        ("DEFAULT_INSTANCE_COUNT", "0", "DEFAULT_INSTANCE_COUNT='0' is below 1"),
        ("USE_SPOT", "yes", "USE_SPOT='yes' is not one of ['true', 'false']"),
        ("DEFAULT_HYPERPARAMETERS", "[1]", "DEFAULT_HYPERPARAMETERS='[1]' is not a JSON dict"),
        ("METRIC_DEFINITIONS", "{not json", "METRIC_DEFINITIONS is not valid JSON"),
        ("OUTPUT_S3_URI", "models/", "OUTPUT_S3_URI='models/' is not an S3 URI"),
        ("DATASET_PREFIX", "datasets", "DATASET_PREFIX='datasets' must end with '/'"),
        ("ROLE_ARN", "", "ROLE_ARN is missing"),
        ("SUBNET_IDS", "subnet-0a1b", "SUBNET_IDS and SECURITY_GROUP_IDS must be both set"),
    ],
)
def test_each_bad_variable_is_named_with_its_fix(name, value, message):
    # Given the stack's environment with one bad variable
    environ = stack_environ(**{name: value})
    # When it is read
    with pytest.raises(SettingsError) as raised:
        settings_from_environ(environ)
    # Then the error names that variable and its value
    assert any(message in error for error in raised.value.errors), raised.value.errors


def test_all_bad_variables_are_reported_together():
    environ = stack_environ(INPUT_MODE="Pipe", VOLUME_SIZE_GB="big")
    with pytest.raises(SettingsError) as raised:
        settings_from_environ(environ)
    assert [error.split("=")[0] for error in raised.value.errors] == ["INPUT_MODE", "VOLUME_SIZE_GB"]


def test_no_wait_is_accepted_when_spot_is_off():
    # Given the environment the stack sets with spot off: MAX_WAIT_SECONDS="0" (cdk.json dev)
    environ = stack_environ(USE_SPOT="false", MAX_WAIT_SECONDS="0")
    # When it is read
    settings = settings_from_environ(environ)
    # Then no wait is configured, and on-demand jobs need none
    assert (settings.use_spot, settings.max_wait_seconds) == (False, 0)


@pytest.mark.parametrize("max_wait", ["0", "3600"])
def test_spot_needs_a_wait_that_covers_the_runtime(max_wait):
    # Given spot on with a wait shorter than the runtime
    environ = stack_environ(USE_SPOT="true", MAX_RUNTIME_SECONDS="86400", MAX_WAIT_SECONDS=max_wait)
    # When it is read
    with pytest.raises(SettingsError) as raised:
        settings_from_environ(environ)
    # Then the error names both variables and the fix
    assert any(f"MAX_WAIT_SECONDS={max_wait} is below MAX_RUNTIME_SECONDS=86400" in error
               for error in raised.value.errors), raised.value.errors


def test_a_negative_wait_is_refused_even_without_spot():
    with pytest.raises(SettingsError) as raised:
        settings_from_environ(stack_environ(USE_SPOT="false", MAX_WAIT_SECONDS="-1"))
    assert any("MAX_WAIT_SECONDS='-1' is below 0" in error for error in raised.value.errors), raised.value.errors
