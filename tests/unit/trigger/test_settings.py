"""The stack's environment and the settings file in the bundle become frozen Settings; every bad value is named with
its fix."""

from __future__ import annotations

import dataclasses
import json

import pytest
from training_trigger.settings import SettingsError, settings_from_environ

from trigger.sample_inputs import STATIC_SETTINGS_NAME, stack_environ, stack_settings, write_stack_settings


def test_environment_and_settings_file_parse_into_typed_settings(tmp_path):
    # Given the settings file the stack writes into the bundle, with a VPC and spot, and the environment naming it
    environ = write_stack_settings(tmp_path, subnet_ids=["subnet-0a1b", "subnet-2c3d"], security_group_ids=["sg-0f1e"],
                                   use_spot=True)
    environ["KMS_KEY_ARN"] = "arn:aws:kms:eu-west-1:123456789012:key/1234abcd"
    # When they are read
    settings = settings_from_environ(environ)
    # Then lists, numbers, flags and objects arrive typed, and the resolved values come from the environment
    assert settings.subnet_ids == ("subnet-0a1b", "subnet-2c3d")
    assert settings.security_group_ids == ("sg-0f1e",)
    assert settings.kms_key_arn == environ["KMS_KEY_ARN"]
    assert settings.use_spot is True
    assert settings.default_instance_count == 1
    assert settings.marker_names == ("_SUCCESS", "manifest.json")
    assert settings.default_hyperparameters == {"epochs": 10, "loss": "listwise"}
    assert "train_ddp.py" in settings.bundle_files and settings.training_flags["flags"]["epochs"]["type"] == "int"
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.role_arn = "changed"


def test_empty_kms_key_means_no_kms():
    assert stack_settings(KMS_KEY_ARN="").kms_key_arn is None


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"default_distribution": "horovod"}, "default_distribution='horovod' is not one of"),
        ({"default_instance_count": "two"}, "default_instance_count='two' is not a whole number >= 1"),
        ({"default_instance_count": 0}, "default_instance_count=0 is below 1"),
        ({"volume_size_gb": True}, "volume_size_gb=True is not a whole number >= 1"),
        ({"use_spot": "yes"}, "use_spot='yes' is not true or false"),
        ({"default_hyperparameters": [1]}, "default_hyperparameters=[1] is not an object"),
        ({"metric_definitions": {"Name": "x"}}, "metric_definitions={'Name': 'x'} is not a list of objects"),
        ({"dataset_prefix": "datasets"}, "dataset_prefix='datasets' must end with '/'"),
        ({"default_entry_point": "train.py"}, "default_entry_point='train.py' is not in bundle_files"),
        ({"subnet_ids": ["subnet-0a1b"]}, "subnet_ids and security_group_ids must be both set"),
        ({"training_flags": {}}, "checked_entry_points=['train_ddp.py', 'train_lightning.py'] without the training "
                                 "code's flag definitions"),
        ({"OUTPUT_S3_URI": "models/"}, "OUTPUT_S3_URI='models/' is not an S3 URI"),
        ({"default_launch": "v3"}, "default_launch='v3' is not one of ['toolkit', 'model_trainer']"),
        ({"model_trainer": {"prefix": "model-trainer/0a1b/"}}, "model_trainer={'prefix': 'model-trainer/0a1b/'} lacks "
                                                               "the launch's files"),
        ({"ROLE_ARN": ""}, "ROLE_ARN is missing"),
    ],
)
def test_each_bad_value_is_named_with_its_fix(changes, message):
    # Given the stack's settings with one bad value / When they are read
    with pytest.raises(SettingsError) as raised:
        stack_settings(**changes)
    # Then the error names that value and where it comes from
    assert any(message in error for error in raised.value.errors), raised.value.errors


def test_all_bad_values_are_reported_together():
    with pytest.raises(SettingsError) as raised:
        stack_settings(input_mode="Pipe", volume_size_gb="big")
    assert sorted(error.split("=")[0] for error in raised.value.errors) == [f"{STATIC_SETTINGS_NAME}: input_mode",
                                                                            f"{STATIC_SETTINGS_NAME}: volume_size_gb"]


def test_a_missing_or_broken_settings_file_names_the_file_and_the_fix(tmp_path):
    # Given an environment naming a settings file that is not there, and one that is not JSON
    missing = stack_environ(STATIC_SETTINGS_FILE=str(tmp_path / "absent.json"))
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    # When they are read / Then each error names the file and says to deploy again
    for environ, named in ((missing, "absent.json"), (stack_environ(STATIC_SETTINGS_FILE=str(broken)), "broken.json")):
        with pytest.raises(SettingsError, match=rf"{named} cannot be read as JSON .*deploy the stack again"):
            settings_from_environ(environ)
    with pytest.raises(SettingsError, match="STATIC_SETTINGS_FILE is missing"):
        settings_from_environ({key: value for key, value in stack_environ().items() if key != "STATIC_SETTINGS_FILE"})


def test_the_settings_file_name_is_resolved_inside_the_bundle(tmp_path, monkeypatch):
    # Given a bundle root holding the settings file under the name the stack sets (a relative name)
    from training_trigger import settings as settings_module

    write_stack_settings(tmp_path)
    monkeypatch.setattr(settings_module, "BUNDLE_ROOT", tmp_path)
    # When the environment names it relatively / Then it is read from the bundle root
    assert settings_from_environ(stack_environ()).job_name_prefix == json.loads(
        (tmp_path / STATIC_SETTINGS_NAME).read_text())["job_name_prefix"]


def test_no_wait_is_accepted_when_spot_is_off():
    # Given the settings the stack writes with spot off: max_wait_seconds 0 (cdk.json dev)
    settings = stack_settings(use_spot=False, max_wait_seconds=0)
    # Then no wait is configured, and on-demand jobs need none
    assert (settings.use_spot, settings.max_wait_seconds) == (False, 0)


@pytest.mark.parametrize("max_wait", [0, 3600])
def test_spot_needs_a_wait_that_covers_the_runtime(max_wait):
    # Given spot on with a wait shorter than the runtime / When read / Then both values and the fix are named
    with pytest.raises(SettingsError) as raised:
        stack_settings(use_spot=True, max_runtime_seconds=86400, max_wait_seconds=max_wait)
    assert any(f"max_wait_seconds={max_wait} is below max_runtime_seconds=86400" in error
               for error in raised.value.errors), raised.value.errors


def test_a_negative_wait_is_refused_even_without_spot():
    with pytest.raises(SettingsError) as raised:
        stack_settings(use_spot=False, max_wait_seconds=-1)
    assert any("max_wait_seconds=-1 is below 0" in error for error in raised.value.errors), raised.value.errors
