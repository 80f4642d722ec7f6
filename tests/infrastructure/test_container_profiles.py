"""The container-profile table against the SageMaker SDK, and the defaults it gives each distribution.

The table decides for synthesis and for the trigger's preflight; these tests hold it to the SDK's own tables and
prove that whatever distribution is chosen, the job synthesis sets up as the default is one preflight accepts.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from sagemaker_distributed import container_profiles as profiles
from training_trigger.planning import TrainingJobSpec
from training_trigger.preflight import preflight_errors
from training_trigger.model_trainer_request import training_job_request
from training_trigger.request import build_training_job_request
from training_trigger.settings import Settings, settings_from

from stacks.config import ConfigError
from stacks.lambda_bundle import stage_lambda_bundle
from stacks.model_trainer_files import model_trainer_settings
from stacks.sagemaker_sdk import sdk_module
from stacks.training_image import resolve_dlc_image
from stacks.trigger_environment import trigger_environment, trigger_static_settings

from .synthesis import (
    PROJECT_ROOT,
    STAND_INS,
    config_for,
    synthesize,
    synthesized_static_settings,
    trigger_function,
)

fw_utils = sdk_module("fw_utils")
SDK_IMAGE_TABLE = Path(fw_utils.__file__).parent / "image_uri_config" / "pytorch.json"


def test_every_profile_is_an_image_the_sdk_knows_with_that_python() -> None:
    versions = json.loads(SDK_IMAGE_TABLE.read_text())["training"]["versions"]
    for profile in profiles.PROFILES:
        assert profile.python_version in versions[profile.framework_version]["py_versions"], profile.name
    newest_known = max(versions, key=lambda version: tuple(int(part) for part in version.split(".")))
    assert profiles.PROFILES[-1].framework_version == newest_known


@pytest.mark.parametrize("profile", profiles.PROFILES, ids=lambda profile: profile.name)
def test_each_profile_allows_exactly_what_the_sdk_accepts(profile) -> None:
    sdk_smddp = profile.framework_version in fw_utils.SM_DATAPARALLEL_SUPPORTED_FRAMEWORK_VERSIONS["pytorch"]
    sdk_torchrun = profile.framework_version in fw_utils.TORCH_DISTRIBUTED_GPU_SUPPORTED_FRAMEWORK_VERSIONS
    assert profile.smddp == sdk_smddp
    assert set(profile.distributions) == {"none", *(["torch_distributed"] if sdk_torchrun else []),
                                          *(profiles.SMDDP_DISTRIBUTIONS if sdk_smddp else [])}


def test_smddp_instances_are_the_sdks_less_the_one_aws_dropped() -> None:
    sdk = set(fw_utils.SM_DATAPARALLEL_SUPPORTED_INSTANCE_TYPES) - {"local_gpu"}
    assert sdk - set(profiles.SMDDP_INSTANCE_TYPES) == {"ml.p3.16xlarge"}
    assert set(profiles.SMDDP_INSTANCE_TYPES) <= sdk


@pytest.mark.parametrize("profile", profiles.PROFILES, ids=lambda profile: profile.name)
def test_each_profile_resolves_to_its_dlc(profile) -> None:
    config = config_for("dev", distribution="none", framework_version=profile.framework_version)
    assert config.python_version == profile.python_version
    assert resolve_dlc_image(config).uri.endswith(f"/pytorch-training:{profile.framework_version}-gpu-"
                                                  f"{profile.python_version}")


@pytest.mark.parametrize(("distribution", "framework", "python", "instance_type"), [
    ("pytorchddp", "2.2.0", "py310", "ml.p4d.24xlarge"),
    ("smdistributed", "2.2.0", "py310", "ml.p4d.24xlarge"),
    ("torch_distributed", "2.8.0", "py312", "ml.g5.12xlarge"),
    ("none", "2.8.0", "py312", "ml.g5.2xlarge"),
])
def test_unset_container_and_instance_follow_the_distribution(distribution, framework, python, instance_type) -> None:
    config = config_for("dev", distribution=distribution)
    assert (config.framework_version, config.python_version, config.instance_type) == (framework, python,
                                                                                       instance_type)


@pytest.mark.parametrize(("overrides", "named"), [
    ({"distribution": "pytorchddp", "framework_version": "2.8.0"},
     ["distribution='pytorchddp' does not run in the AWS PyTorch 2.8.0 container", "['2.2.0']"]),
    ({"distribution": "torch_distributed", "instance_type": "ml.trn1n.32xlarge"},
     ["instance_type='ml.trn1n.32xlarge'", "Neuron", "ml.g5.12xlarge"]),
    # Inferentia trains nothing: not a training instance type of SageMaker's API
    ({"distribution": "none", "instance_type": "ml.inf2.xlarge"},
     ["instance_type='ml.inf2.xlarge' is not a training instance type SageMaker knows"]),
    ({"distribution": "none", "instance_type": "ml.trn1.32xlarge"}, ["instance_type='ml.trn1.32xlarge'", "Neuron"]),
    ({"distribution": "pytorchddp", "instance_type": "ml.g5.12xlarge"},
     ["distribution='pytorchddp' needs an SMDDP instance", "ml.p4d.24xlarge"]),
    ({"framework_version": "2.2.0", "python_version": "py312"},
     ["python_version='py312'", "PyTorch 2.2.0 container, which has py310"]),
    ({"distribution": "torch_distributed", "framework_version": "2.4.0"},
     ["does not run in the AWS PyTorch 2.4.0 container", "'2.8.0'"]),
])
def test_container_rules_refuse_naming_key_and_fix(overrides, named) -> None:
    with pytest.raises(ConfigError) as error:
        config_for("dev", **overrides)
    for text in named:
        assert text in str(error.value)


def _default_job(settings: Settings) -> TrainingJobSpec:
    return TrainingJobSpec(
        job_name=f"{settings.job_name_prefix}-letor-2026-11-01-0a1b2c3d4e",
        channels={"train": f"s3://{settings.data_bucket}/{settings.dataset_prefix}letor/2026-11-01/train/"},
        entry_point=settings.default_entry_point, distribution=settings.default_distribution,
        instance_type=settings.default_instance_type, instance_count=settings.default_instance_count,
        hyperparameters=dict(settings.default_hyperparameters), spot=settings.use_spot,
        max_runtime=settings.max_runtime_seconds, tags={}, launch=settings.default_launch)


def _settings_for(environment: dict[str, str], static: dict[str, Any], region: str,
                  monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.setenv("AWS_DEFAULT_REGION", region)  # the service model the preflight checks against
    return settings_from({**environment, "AWS_REGION": region}, static, environment["STATIC_SETTINGS_FILE"])


@pytest.mark.parametrize("env_name", ["dev", "prod"])
@pytest.mark.parametrize(("distribution", "launch"), [
    *((distribution, profiles.TOOLKIT_LAUNCH) for distribution in profiles.DISTRIBUTIONS),
    *((distribution, profiles.MODEL_TRAINER_LAUNCH) for distribution in profiles.MODEL_TRAINER_DISTRIBUTIONS)])
def test_the_default_job_of_every_distribution_and_launch_passes_preflight(env_name, distribution, launch,
                                                                          monkeypatch) -> None:
    # Given the configuration `-c distribution=X -c launch=Y` gives, and the environment the stack hands the trigger
    config = config_for(env_name, distribution=distribution, launch=launch)
    environment = trigger_environment(
        config, data_bucket="ranker-data-example", artifacts_bucket="ranker-artifacts-example",
        role_arn="arn:aws:iam::123456789012:role/ranker-sagemaker-execution",
        image_uri=resolve_dlc_image(config).uri, source_bundle_uri="s3://ranker-artifacts-example/code/sourcedir.tar.gz",
        kms_key_arn=None, notification_topic_arn="arn:aws:sns:us-east-1:123456789012:ranker-training")
    members = config.source_members()
    static = trigger_static_settings(config, bundle_files=members,
                                     model_trainer=model_trainer_settings(members, source_dir=config.source_dir))
    settings = _settings_for(environment, static, config.region, monkeypatch)
    # When the trigger checks the job it starts by default / Then nothing is refused
    spec = _default_job(settings)
    assert preflight_errors(training_job_request(spec, settings), spec, settings) == []


def test_a_synthesized_pytorchddp_stack_starts_jobs_preflight_accepts(tmp_path: Path, monkeypatch) -> None:
    # Given `cdk synth -c distribution=pytorchddp` with everything else as cdk.json has it
    app = synthesize(config_for("dev", distribution="pytorchddp"), tmp_path)
    variables = trigger_function(app.stateless)["Properties"]["Environment"]["Variables"]
    # (tokens resolve at deploy time: stand in plausible values for the references)
    environment = {name: value if isinstance(value, str) else STAND_INS[name] for name, value in variables.items()}
    settings = _settings_for(environment, synthesized_static_settings(app), app.config.region, monkeypatch)
    # When the trigger checks its default job / Then it is accepted, on the SMDDP container and instance
    spec = _default_job(settings)
    assert preflight_errors(build_training_job_request(spec, settings), spec, settings) == []
    assert (settings.framework_version, settings.default_instance_type) == ("2.2.0", "ml.p4d.24xlarge")


def test_the_trigger_bundle_carries_the_profile_table(tmp_path: Path) -> None:
    staged = stage_lambda_bundle(PROJECT_ROOT / "lambda" / "trigger", tmp_path / "bundle")
    copy = staged / "training_trigger" / "container_profiles.py"
    assert copy.is_file() and not copy.is_symlink()
    assert copy.read_bytes() == Path(profiles.__file__).read_bytes()
    assert not os.path.islink(staged / "training_trigger")


DOC = PROJECT_ROOT / "docs" / "container-profiles.md"
DOC_SWITCH = "UPDATE_DOCS"
TABLE_START, TABLE_END = "<!-- container-profiles:start -->", "<!-- container-profiles:end -->"


def profiles_table() -> str:
    """The table docs/container-profiles.md shows, rendered from the profile module."""
    defaults = {profile.framework_version: [d for d in profiles.DISTRIBUTIONS if profiles.default_profile(d) == profile]
                for profile in profiles.PROFILES}
    rows = ["| framework_version | python_version | SMDDP | distributions | default for | torch (kept) | numpy (kept) |",
            "|---|---|---|---|---|---|---|"]
    for profile in profiles.PROFILES:
        rows.append(f"| {profile.framework_version} | {profile.python_version} | {'yes' if profile.smddp else 'no'} | "
                    f"{', '.join(profile.distributions)} | {', '.join(defaults[profile.framework_version]) or '-'} | "
                    f"=={profile.framework_version} | {profile.numpy_major}.x |")
    return "\n".join(rows)


def test_the_docs_table_is_the_module_rendered() -> None:
    text = DOC.read_text()
    before, rest = text.split(TABLE_START)
    _, after = rest.split(TABLE_END)
    current = f"{before}{TABLE_START}\n{profiles_table()}\n{TABLE_END}{after}"
    if os.environ.get(DOC_SWITCH) == "1":
        DOC.write_text(current)
        text = current
    assert text == current, (f"{DOC} is stale: run `{DOC_SWITCH}=1 .venv/bin/python -m pytest "
                             f"tests/infrastructure/test_container_profiles.py -k docs`")
