"""Bad configuration fails synthesis with a message naming the key, the bad value and what is allowed."""

from __future__ import annotations

import importlib.util
import json
import tarfile
from pathlib import Path

import pytest
from aws_cdk import App

from app import config_from_context
from stacks.config import ConfigError

from .synthesis import CDK_CONTEXT, make_synth, config_for


def test_cdk_json_defaults_are_valid_for_every_named_environment() -> None:
    for env_name in CDK_CONTEXT["environments"]:
        # Given cdk.json as committed / When it is validated / Then it passes
        assert config_for(env_name).env_name == env_name


@pytest.mark.parametrize(("overrides", "named"), [
    ({"project_prefix": "Ranker_X"}, ["project_prefix", "Ranker_X"]),
    # Every tuning job would be refused: `<prefix>-<dataset>-<its own part>` must fit SageMaker's 32 characters
    ({"project_prefix": "search-relevance-ranking"},
     ["project_prefix='search-relevance-ranking': 24 characters leave no room in a tuning job's name", "at most 21"]),
    ({"region": "mars-north-1"}, ["region", "mars-north-1"]),
    ({"dataset_prefix": "/datasets"}, ["dataset_prefix", "/datasets"]),
    ({"marker_names": ["ok", "bad/name"]}, ["marker_names", "bad/name"]),
    ({"marker_names": []}, ["marker_names"]),
    ({"entry_point": "train.py"}, ["entry_point", "train.py", "train_lightning.py"]),
    ({"distribution": "horovod"}, ["distribution", "horovod", "torch_distributed"]),
    ({"instance_type": "g5.xlarge"}, ["instance_type", "g5.xlarge"]),
    ({"instance_count": 0}, ["instance_count", "0"]),
    ({"framework_version": "latest"}, ["framework_version", "latest"]),
    ({"python_version": "3.10"}, ["python_version", "3.10"]),
    ({"image_source": "dockerhub"}, ["image_source", "dockerhub", "custom"]),
    ({"image_source": "custom"}, ["custom_image_tag", "None", "image_source"]),
    ({"input_mode": "Pipe"}, ["input_mode", "Pipe", "FastFile"]),
    ({"volume_size_gb": 0}, ["volume_size_gb", "0"]),
    ({"max_runtime_seconds": 10**9}, ["max_runtime_seconds", "1000000000"]),
    ({"use_spot": True, "max_wait_seconds": 60}, ["max_wait_seconds", "60", "max_runtime_seconds"]),
    ({"use_spot": True, "max_wait_seconds": 90000, "keep_alive_seconds": 300}, ["keep_alive_seconds", "300", "spot"]),
    ({"keep_alive_seconds": 7200}, ["keep_alive_seconds", "7200"]),
    ({"job_retry_attempts": -1}, ["job_retry_attempts", "-1"]),
    ({"subnet_ids": ["subnet-0123456789abcdef0"]}, ["subnet_ids/security_group_ids", "both"]),
    ({"subnet_ids": "vpc-1", "security_group_ids": "sg-01234567"}, ["subnet_ids", "vpc-1", "subnet-"]),
    ({"enable_kms": "maybe"}, ["enable_kms", "maybe"]),
    ({"notification_email": "not-an-address"}, ["notification_email", "not-an-address"]),
    ({"retrain_schedule": "weekly"}, ["retrain_schedule", "weekly"]),
    ({"removal_policy": "snapshot"}, ["removal_policy", "snapshot", "retain"]),
    ({"trigger_reserved_concurrency": 0}, ["trigger_reserved_concurrency", "0"]),
    ({"log_retention_days": 10}, ["log_retention_days", "10", "14"]),
    ({"default_hyperparameters": {"sagemaker_program": "x.py"}}, ["default_hyperparameters", "sagemaker_program"]),
    # The project's own scripts parse the defaults with every job: a value they refuse stops synthesis instead
    ({"default_hyperparameters": {"epoch": 2}}, ["default_hyperparameters", "unknown flag(s) ['--epoch', '2']"]),
    ({"default_hyperparameters": {"dropout": 1.5}}, ["default_hyperparameters", "--dropout: bad value 1.5"]),
    ({"distribution": "torch_distributed", "instance_type": "ml.c5.xlarge"}, ["instance_type", "ml.c5.xlarge", "GPU"]),
    ({"distribution": "pytorchddp", "framework_version": "2.3.0"}, ["distribution", "pytorchddp", "2.2.0"]),
    ({"unknown_key": 1}, ["unknown_key"]),
    # The job's environment, against CreateTrainingJob's limits and the names the platform owns (job_environment.py)
    ({"default_environment": {"SM_HOSTS": "[]"}}, ["default_environment.SM_HOSTS", "SageMaker training toolkit"]),
    ({"default_environment": '{"NCCL_PROTO": "LL"}'}, ["default_environment.NCCL_PROTO", "torchrun launcher"]),
    ({"default_environment": {"9LIVES": "1"}}, ["default_environment", "'9LIVES'", "variable name"]),
    ({"default_environment": {"NCCL_DEBUG": 3}}, ["default_environment.NCCL_DEBUG", "3", "valid string"]),
    ({"default_environment": {"LOG": "x" * 600}}, ["default_environment.LOG", "600 characters", "512"]),
    ({"train_data_distribution": "Sharded"}, ["train_data_distribution", "Sharded", "ShardedByS3Key"]),
    ({"registration_threshold": {"metric": "epoch", "minimum": 3}},
     ["registration_threshold.metric", "epoch", "test_ndcg@10"]),
    ({"registration_threshold": {"metric": "test_ndcg@10", "minimum": 0.5},
      "metric_definitions": [{"Name": "auc", "Regex": "auc=([0-9.]+)"}]},
     ["registration_threshold.metric", "test_ndcg@10", "auc"]),
    ({"registration_threshold": '{"metric": "test_ndcg@10", "minimum": "high"}'},
     ["registration_threshold.minimum", "high", "number"]),
    ({"registration_threshold": {"metric": "test_ndcg@10"}}, ["registration_threshold.minimum", "required"]),
    ({"stall_minutes": 5}, ["stall_minutes", "5", "greater than or equal to 10"]),
    ({"stall_check_minutes": 0}, ["stall_check_minutes", "0"]),
    ({"stall_minutes": 10, "stall_check_minutes": 15}, ["stall_check_minutes", "15", "at most stall_minutes (10)"]),
    ({"stall_watchdog": "sometimes"}, ["stall_watchdog", "sometimes"]),
])
def test_bad_value_is_refused_naming_key_value_and_allowed(overrides: dict, named: list[str]) -> None:
    # Given a config with one bad value / When it is validated / Then the error names key, value and what is allowed
    with pytest.raises(ConfigError) as error:
        config_for("dev", **overrides)
    for text in named:
        assert text in str(error.value)


def test_a_job_environment_and_sharding_from_the_command_line_reach_the_trigger_settings() -> None:
    # Given `-c default_environment='{"NCCL_DEBUG": "INFO"}' -c train_data_distribution=ShardedByS3Key`
    from stacks.trigger_environment import trigger_static_settings

    config = config_from_context(App(context={**CDK_CONTEXT, "default_environment": '{"NCCL_DEBUG": "INFO"}',
                                              "train_data_distribution": "ShardedByS3Key"}))
    # When synthesis writes the trigger's settings file
    static = trigger_static_settings(config, bundle_files=["train_lightning.py"], model_trainer={})
    # Then every job gets them as its defaults
    assert static["default_environment"] == {"NCCL_DEBUG": "INFO"}
    assert static["train_data_distribution"] == "ShardedByS3Key"


def test_the_collective_timeout_the_package_reads_is_a_default_environment_synthesis_accepts() -> None:
    # Given `-c default_environment='{"SAGEMAKER_DISTRIBUTED_COLLECTIVE_TIMEOUT": "3600"}'` (docs/bring-your-own.md),
    # under the default torchrun distribution and under SMDDP
    environment = {"SAGEMAKER_DISTRIBUTED_COLLECTIVE_TIMEOUT": "3600"}
    for distribution in ("torch_distributed", "pytorchddp"):
        # When the configuration is validated / Then it keeps the variable, though SAGEMAKER_* names are refused
        assert config_for("dev", distribution=distribution,
                          default_environment=json.dumps(environment)).default_environment == environment
    with pytest.raises(ConfigError, match="default_environment.SAGEMAKER_PROGRAM is set by SageMaker"):
        config_for("dev", default_environment={"SAGEMAKER_PROGRAM": "x.py"})


def test_synthesis_accepts_exactly_the_prefixes_that_name_tuning_jobs() -> None:
    # Given the trigger's own tuning job names, for the longest prefix synthesis accepts and one a character longer
    from training_trigger.job_names import job_name_errors, longest_tuning_prefix, manual_tuning_job_name

    accepted, refused = "r" * (longest_tuning_prefix() - 2) + "-x", "r" * (longest_tuning_prefix() - 1) + "-x"
    # Then the accepted one names a manual tuning job the trigger accepts, and the other stops synthesis
    assert config_for("dev", project_prefix=accepted).project_prefix == accepted
    assert job_name_errors(manual_tuning_job_name(accepted, "web search"), accepted, tuning=True) == []
    with pytest.raises(ConfigError, match=rf"project_prefix='{refused}': .* tuning job's name"):
        config_for("dev", project_prefix=refused)


def test_unknown_environment_names_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"env='staging'.*\['dev', 'prod'\]"):
        config_for("staging")


def _problems(**context: object) -> list[str]:
    """What synthesis says is wrong with cdk.json's context plus `-c key=value` for each of `context`, as app.py
    reads the app's context."""
    with pytest.raises(ConfigError) as error:
        config_from_context(App(context={**CDK_CONTEXT, **context}))
    return error.value.problems


def test_a_bad_distribution_is_one_message_not_the_keys_it_would_have_filled_in() -> None:
    # Given `-c distribution=ddp`, from which framework_version, python_version and instance_type would follow
    [problem] = _problems(distribution="ddp")
    # Then the one message names the key, its value and the choices, and repeats no configuration
    assert problem == "distribution='ddp': use one of ['none', 'torch_distributed', 'pytorchddp', 'smdistributed']"


def test_an_instance_type_is_held_to_the_triggers_rule_for_a_manifests(monkeypatch) -> None:
    # Given `-c instance_type=ml.g5.huge`, and the same value in a dataset's manifest.json
    from training_trigger.limits import instance_type_errors  # what the trigger checks a manifest's value with

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")  # the trigger's client reads its model offline

    [at_synthesis] = _problems(instance_type="ml.g5.huge")
    # Then synthesis refuses it as the trigger refuses the manifest, naming the closest types
    assert at_synthesis.startswith("instance_type='ml.g5.huge' is not a training instance type SageMaker knows: "
                                   "did you mean ['ml.g5.xlarge'")
    assert instance_type_errors("ml.g5.huge", "manifest.json training.instance_type") == [
        f"manifest.json training.{at_synthesis}"]
    # And a type the trigger accepts synthesizes
    assert config_from_context(App(context={**CDK_CONTEXT, "instance_type": "ml.g5.48xlarge"})).instance_type == \
        "ml.g5.48xlarge"


@pytest.mark.parametrize(("context", "problem"), [
    ({"envv": "prod"}, "-c envv='prod' is not a configuration key (did you mean 'env'?): the keys are listed in "
                       "docs/configuration.md"),
    ({"instance_cout": "2"}, "-c instance_cout='2' is not a configuration key (did you mean 'instance_count'?)"),
    ({"env": "prd"}, "env='prd' is not a named environment (did you mean 'prod'?): use one of ['dev', 'prod']"),
    ({"environments": {**CDK_CONTEXT["environments"], "dev": {"use_spott": True}}},
     "use_spott is not a configuration key (did you mean 'use_spot'?)"),
])
def test_an_unknown_key_or_environment_is_refused_with_the_closest_one(context: dict, problem: str) -> None:
    # Given a misspelt key, on the command line or in cdk.json, or a misspelt environment / Then synthesis stops,
    # naming it and the one meant, instead of synthesizing the defaults
    [found] = _problems(**context)
    assert found.startswith(problem)


def test_cdks_own_context_keys_are_not_configuration_typos() -> None:
    # Given the context the CDK CLI passes besides cdk.json's (its own settings, a cached lookup, feature flags)
    context = {**CDK_CONTEXT, "aws:cdk:enable-path-metadata": True, "acknowledged-issue-numbers": [1234],
               "availability-zones:account=123456789012:region=us-east-1": ["us-east-1a"]}
    # Then they are no configuration key and synthesis takes them
    assert config_from_context(App(context=context)).env_name == "dev"


@pytest.mark.slow  # the CDK CLI runs app.py (about ten seconds)
def test_make_synth_says_each_mistake_once_in_a_few_lines(tmp_path) -> None:
    # Given three mistakes a new user makes on the command line
    result = make_synth(tmp_path / "cdk.out", "distribution=ddp", "instance_type=ml.g5.huge", "envv=prod")
    # Then synthesis stops with one line per mistake, each naming its key, and nothing else of the configuration
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.startswith("  ")]
    assert [line.split("=")[0].strip() for line in lines] == ["-c envv", "distribution", "instance_type"], \
        result.stderr
    refusal = result.stderr[result.stderr.index("cdk synth refused the configuration"):]
    assert "required" not in refusal and "project_prefix" not in refusal
    assert len(refusal) < 1000, refusal


def test_framework_version_without_a_supported_container_names_the_supported_ones() -> None:
    # Given a well-formed version for which no supported container exists / When it is validated
    with pytest.raises(ConfigError) as error:
        config_for("dev", framework_version="1.0.1")
    # Then the message names the key, the value and the versions that work
    assert "framework_version='1.0.1'" in str(error.value)
    assert "'2.2.0'" in str(error.value) and "'2.8.0'" in str(error.value)


def test_context_strings_from_the_command_line_override_cdk_json() -> None:
    # Given `-c env=prod -c use_spot=false -c instance_count=3 -c marker_names=_DONE -c subnet_ids=...`
    app = App(context={**CDK_CONTEXT, "env": "prod", "use_spot": "false", "instance_count": "3",
                       "marker_names": "_DONE", "subnet_ids": "subnet-0123456789abcdef0",
                       "security_group_ids": "sg-0123456789abcdef0"})
    # When app.py reads the context
    config = config_from_context(app)
    # Then command-line values win over both cdk.json layers, typed
    assert (config.env_name, config.use_spot, config.instance_count) == ("prod", False, 3)
    assert config.marker_names == ("_DONE",)
    assert config.subnet_ids == ("subnet-0123456789abcdef0",)
    assert config.log_retention_days == CDK_CONTEXT["environments"]["prod"]["log_retention_days"]


def test_reserved_concurrency_is_opt_in_from_the_command_line() -> None:
    # Given cdk.json as committed, then with `-c trigger_reserved_concurrency=3`
    defaults = {env_name: config_for(env_name).trigger_reserved_concurrency for env_name in CDK_CONTEXT["environments"]}
    opted_in = config_from_context(App(context={**CDK_CONTEXT, "trigger_reserved_concurrency": "3"}))
    # Then no environment reserves any by default, and the opt-in arrives typed
    assert defaults == {"dev": None, "prod": None}
    assert opted_in.trigger_reserved_concurrency == 3


def _recommended_feature_flags() -> dict:
    """The flags the installed aws-cdk-lib recommends for new projects: what `cdk init` writes into cdk.json."""
    package_dir = Path(importlib.util.find_spec("aws_cdk").submodule_search_locations[0])
    [library] = (package_dir / "_jsii").glob("aws-cdk-lib@*.jsii.tgz")
    with tarfile.open(library) as archive:
        return json.load(archive.extractfile("package/recommended-feature-flags.json"))


def test_cdk_json_sets_every_feature_flag_cdk_init_writes_for_the_pinned_library() -> None:
    # Given the pinned aws-cdk-lib's recommended flags
    recommended = _recommended_feature_flags()
    # When cdk.json's context is read / Then it sets each of them to the recommended value
    assert {flag: CDK_CONTEXT.get(flag) for flag in recommended} == recommended


def test_config_is_frozen() -> None:
    config = config_for("dev")
    with pytest.raises(ValueError):
        config.instance_count = 5  # type: ignore[misc]


def test_the_registered_metrics_are_the_jobs_metrics_but_the_run_counters() -> None:
    # Given the project's own metrics, then metric_definitions of the user's code
    default = config_for("dev").model_quality_metrics
    custom = config_for("dev", metric_definitions=[{"Name": "epoch", "Regex": "epoch=([0-9]+)"},
                                                    {"Name": "auc", "Regex": "auc=([0-9.]+)"}])
    # Then the model's metrics leave out epoch, step, learning rate and throughput
    assert default == ("train_loss", "val_loss", "val_ndcg@1", "val_ndcg@3", "val_ndcg@5", "val_ndcg@10",
                       "test_ndcg@1", "test_ndcg@3", "test_ndcg@5", "test_ndcg@10")
    assert custom.model_quality_metrics == ("auc",)
    assert config_for("dev", registration_threshold={"metric": "auc", "minimum": 0.7},
                      metric_definitions=[{"Name": "auc", "Regex": "auc=([0-9.]+)"}]).registration_threshold.minimum == 0.7
