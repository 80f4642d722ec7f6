"""The guards' configuration: cost ceilings validated at synthesis, extra data buckets read-only for training jobs
(and for nothing else), and the template checks still clean with them."""

from __future__ import annotations

import json

import pytest
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Template

from ranker.training.selection import SELECTION_METRIC
from stacks.compliance import flatten_reference
from stacks.config import ConfigError
from stacks.execution_role import SageMakerExecutionRole

from . import test_template_checks as template_checks
from .synthesis import SynthesizedApp, bare_stack, config_for, synthesize, synthesized_static_settings
from .test_constructs import DLC, _policy_statements

EXTRA_BUCKETS = ("shared-ltr-corpora", "team.search.exports")
READ_ACTIONS = {"s3:GetObject*", "s3:GetBucket*", "s3:List*"}


@pytest.mark.parametrize(("overrides", "named"), [
    ({"instance_count": 5}, ["instance_count=5", "max_instance_count (4)"]),
    ({"max_instance_count": 0}, ["max_instance_count", "0"]),
    ({"max_runtime_seconds": 300000}, ["max_runtime_seconds=300000", "max_runtime_ceiling_seconds (259200)"]),
    ({"max_runtime_ceiling_seconds": 10**8}, ["max_runtime_ceiling_seconds", "100000000"]),
    ({"extra_data_buckets": ["s3://shared"]}, ["extra_data_buckets", "s3://shared", "bare name"]),
    ({"extra_data_buckets": "ok-bucket,Bad_Bucket"}, ["extra_data_buckets", "Bad_Bucket"]),
    ({"extra_data_buckets": ["a..b"]}, ["extra_data_buckets", "a..b"]),
    ({"tuning_max_parallel_jobs": 12}, ["tuning_max_parallel_jobs=12", "at most tuning_max_jobs (10)"]),
    ({"tuning_strategy": "Genetic"}, ["tuning_strategy", "Genetic"]),
    ({"max_tuning_instance_hours": 0}, ["max_tuning_instance_hours", "0"]),
])
def test_ceilings_and_extra_buckets_are_validated_at_synthesis(overrides: dict, named: list[str]) -> None:
    # Given a config with one bad guard value / When it is validated / Then the error names key, value and rule
    with pytest.raises(ConfigError) as error:
        config_for("dev", **overrides)
    for text in named:
        assert text in str(error.value)


def test_command_line_extra_buckets_arrive_as_a_list() -> None:
    config = config_for("dev", extra_data_buckets="shared-ltr-corpora, team.search.exports")
    assert config.extra_data_buckets == EXTRA_BUCKETS


def _statements_naming(statements: list[dict], bucket: str) -> list[dict]:
    return [statement for statement in statements if bucket in json.dumps(statement["Resource"])]


def test_extra_buckets_get_read_grants_and_nothing_more() -> None:
    # Given the execution role with two extra data buckets
    stack = bare_stack()
    SageMakerExecutionRole(
        stack, "Role", data_bucket=s3.Bucket(stack, "Data"), dataset_prefix="datasets/",
        artifacts_bucket=s3.Bucket(stack, "Artifacts"), repository=ecr.Repository(stack, "Repo"), dlc_image=DLC,
        key=None, subnet_ids=(), security_group_ids=(), extra_data_buckets=EXTRA_BUCKETS)
    statements = _policy_statements(Template.from_stack(stack))
    for bucket in EXTRA_BUCKETS:
        # When the statements that name the bucket are read
        granting = _statements_naming(statements, bucket)
        # Then they allow reading it, and only reading: no write, delete or other action on it
        assert granting, f"no statement grants {bucket}"
        assert all(statement["Effect"] == "Allow" for statement in granting)
        assert {action for statement in granting for action in statement["Action"]} == READ_ACTIONS
        resources = {flatten_reference(resource) for statement in granting for resource in statement["Resource"]}
        bucket_arn = f"arn:<AWS::Partition>:s3:::{bucket}"
        assert {resource for resource in resources if bucket in resource} == {bucket_arn, f"{bucket_arn}/*"}


def test_without_extra_buckets_the_role_reads_only_the_data_prefix(dev_app: SynthesizedApp) -> None:
    statements = [statement for policy in dev_app.stateless["Resources"].values()
                  if policy["Type"] == "AWS::IAM::Policy"
                  for statement in policy["Properties"]["PolicyDocument"]["Statement"]]
    assert not any(bucket in json.dumps(statements) for bucket in EXTRA_BUCKETS)


@pytest.fixture(scope="module")
def extra_buckets_app(tmp_path_factory: pytest.TempPathFactory) -> SynthesizedApp:
    """The dev pipeline with extra data buckets (synthesis itself fails on an unacknowledged cdk-nag finding)."""
    return synthesize(config_for("dev", extra_data_buckets=list(EXTRA_BUCKETS)), tmp_path_factory.mktemp("synth"))


def test_extra_buckets_reach_the_trigger(extra_buckets_app: SynthesizedApp) -> None:
    static = synthesized_static_settings(extra_buckets_app)
    assert static["extra_data_buckets"] == list(EXTRA_BUCKETS)
    assert (static["max_instance_count"], static["max_runtime_ceiling_seconds"]) == (4, 259200)
    # And the tuning defaults and ceiling, with the objective the project's scripts select their weights by
    assert {key: static[key] for key in ("tuning_strategy", "tuning_max_jobs", "tuning_max_parallel_jobs",
                                         "tuning_early_stopping", "max_tuning_instance_hours")} == {
        "tuning_strategy": "Bayesian", "tuning_max_jobs": 10, "tuning_max_parallel_jobs": 2,
        "tuning_early_stopping": "Off", "max_tuning_instance_hours": 960}
    assert static["default_tuning_objective"] == {"MetricName": SELECTION_METRIC, "Type": "Maximize"}


def test_extra_buckets_leave_cdk_nag_clean(extra_buckets_app: SynthesizedApp) -> None:
    template_checks.test_every_cdk_nag_finding_is_acknowledged_with_a_reason(extra_buckets_app)


@pytest.mark.slow
def test_extra_buckets_leave_cfn_lint_and_checkov_clean(extra_buckets_app: SynthesizedApp) -> None:
    template_checks.assert_cfn_lint_finds_no_errors(extra_buckets_app)
    template_checks.assert_checkov_fails_no_check(extra_buckets_app)
