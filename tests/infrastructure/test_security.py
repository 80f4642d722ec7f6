"""Security properties of the synthesized templates (issue 8), and a secret scan of the repository."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
from pathlib import Path
from typing import Any

from .synthesis import PROJECT_ROOT, SynthesizedApp, resources_of_type

# Resources AWS does not let a policy scope, with the actions that may use "*" and why.
UNSCOPABLE_ACTIONS = {
    "ecr:GetAuthorizationToken": "returns a registry-wide login token; ECR offers no resource-level permission",
    "cloudwatch:PutMetricData": "no resource-level permission; limited by the cloudwatch:namespace condition",
    "ec2:DescribeNetworkInterfaces": "EC2 Describe* calls have no resource-level permissions (VPC jobs only)",
    "ec2:DescribeVpcs": "as above", "ec2:DescribeDhcpOptions": "as above", "ec2:DescribeSubnets": "as above",
    "ec2:DescribeSecurityGroups": "as above",
    "ec2:DeleteNetworkInterfacePermission": "its request names only the permission's ID; EC2 authorizes it on no "
                                            "resource type (VPC jobs only)",
    "sagemaker:ListTrainingJobs": "SageMaker List* calls have no resource-level permissions; the watchdog then "
                                  "describes and stops only `<prefix>-*` jobs",
}


def _dlc_registry_accounts() -> set[str]:
    """AWS's public Deep Learning Container registries, from the SageMaker SDK's own image table."""
    sdk_dir = Path(importlib.util.find_spec("sagemaker").submodule_search_locations[0])
    table = json.loads((sdk_dir / "image_uri_config" / "pytorch.json").read_text())
    accounts = set()
    for scope in ("training", "inference"):
        for version in table[scope]["versions"].values():
            accounts |= set(version.get("registries", {}).values())
    return accounts


# AWS's documented example account (also moto's default); it belongs to no one.
PLACEHOLDER_ACCOUNTS = {"123456789012"}


def _statements(template: dict[str, Any], policy_type: str = "AWS::IAM::Policy") -> list[dict[str, Any]]:
    found = []
    for resource in resources_of_type(template, policy_type).values():
        statements = resource["Properties"]["PolicyDocument"]["Statement"]
        found += statements if isinstance(statements, list) else [statements]
    return found


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def test_no_action_is_a_full_or_service_wide_wildcard(any_app: SynthesizedApp) -> None:
    for template in any_app.templates.values():
        for statement in _statements(template) + _statements(template, "AWS::IAM::ManagedPolicy"):
            for action in _as_list(statement["Action"]):
                assert action != "*" and not action.endswith(":*"), f"wildcard action {action} in {statement}"


def test_every_resource_is_scoped_except_where_aws_allows_none(any_app: SynthesizedApp) -> None:
    for template in any_app.templates.values():
        for statement in _statements(template):
            if "*" in _as_list(statement["Resource"]):
                unscoped = [action for action in _as_list(statement["Action"]) if action not in UNSCOPABLE_ACTIONS]
                assert unscoped == [], f"actions {unscoped} on Resource '*' in {statement}"


def test_training_jobs_and_model_packages_are_limited_to_the_project_prefix(any_app: SynthesizedApp) -> None:
    """Training and tuning jobs, package groups and packages named with the project prefix, nothing else."""
    sagemaker = [statement for statement in _statements(any_app.stateless)
                 if any(str(action).startswith("sagemaker:") for action in _as_list(statement["Action"]))
                 and not set(_as_list(statement["Action"])) <= set(UNSCOPABLE_ACTIONS)]
    assert sagemaker, "the stack's roles have no SageMaker statement"
    prefix = any_app.config.project_prefix
    project_resources = tuple(f':{kind}/{prefix}-*"]]}}' for kind in ("training-job", "hyper-parameter-tuning-job",
                                                                        "model-package-group", "model-package"))
    for statement in sagemaker:
        for resource in _as_list(statement["Resource"]):
            text = json.dumps(resource)
            assert text.endswith(project_resources), text


def test_pass_role_is_limited_to_sagemaker(any_app: SynthesizedApp) -> None:
    pass_role = [statement for template in any_app.templates.values() for statement in _statements(template)
                 if "iam:PassRole" in _as_list(statement["Action"])]
    assert len(pass_role) == 1
    assert pass_role[0]["Condition"] == {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}
    assert "*" not in json.dumps(pass_role[0]["Resource"])


def _ref_or_arn(value: Any) -> str:
    """The logical ID a `Ref` or `Fn::GetAtt [id, Arn]` points at."""
    return value["Ref"] if "Ref" in value else value["Fn::GetAtt"][0]


def test_topic_policy_lets_exactly_this_stacks_rules_and_alarms_publish(any_app: SynthesizedApp) -> None:
    # Given the pipeline's topic, the rules that target it and the alarms that act on it
    template = any_app.stateless
    [topic_id] = resources_of_type(template, "AWS::SNS::Topic")
    rules = {logical_id for logical_id, rule in resources_of_type(template, "AWS::Events::Rule").items()
             if any(target["Arn"] == {"Ref": topic_id} for target in rule["Properties"].get("Targets", []))}
    alarms = {logical_id for logical_id, alarm in resources_of_type(template, "AWS::CloudWatch::Alarm").items()
              if {"Ref": topic_id} in alarm["Properties"].get("AlarmActions", [])}
    assert rules and alarms
    # When the topic policy's Allow statements are read
    allowed: dict[str, set[str]] = {}
    for statement in _statements(template, "AWS::SNS::TopicPolicy"):
        if statement["Effect"] != "Allow":
            continue
        # Then each names one AWS service, is limited to this account and to named sources (confused deputy)
        service = statement["Principal"]["Service"]
        assert statement["Action"] == "sns:Publish", statement
        assert statement["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}, statement
        sources = statement["Condition"]["ArnEquals"]["aws:SourceArn"]
        allowed[service] = {_ref_or_arn(source) for source in _as_list(sources)}
    # and those sources are exactly the rules and alarms that publish: alarms included, or they notify no one
    assert allowed == {"events.amazonaws.com": rules, "cloudwatch.amazonaws.com": alarms}


def test_every_bucket_blocks_public_access_and_denies_plain_http(any_app: SynthesizedApp) -> None:
    buckets = resources_of_type(any_app.stateful, "AWS::S3::Bucket")
    policies = {json.dumps(policy["Properties"]["Bucket"]): policy["Properties"]["PolicyDocument"]["Statement"]
                for policy in resources_of_type(any_app.stateful, "AWS::S3::BucketPolicy").values()}
    for logical_id, bucket in buckets.items():
        assert set(bucket["Properties"]["PublicAccessBlockConfiguration"].values()) == {True}, logical_id
        statements = policies[json.dumps({"Ref": logical_id})]
        assert any(statement["Effect"] == "Deny" and statement["Condition"].get("Bool") ==
                   {"aws:SecureTransport": "false"} for statement in statements), f"{logical_id} allows plain HTTP"


def test_every_bucket_queue_topic_and_log_group_is_encrypted(any_app: SynthesizedApp) -> None:
    templates = any_app.templates.values()
    for template in templates:
        for logical_id, bucket in resources_of_type(template, "AWS::S3::Bucket").items():
            assert bucket["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"], logical_id
        for logical_id, queue in resources_of_type(template, "AWS::SQS::Queue").items():
            properties = queue["Properties"]
            assert properties.get("KmsMasterKeyId") or properties.get("SqsManagedSseEnabled"), logical_id
        for logical_id, topic in resources_of_type(template, "AWS::SNS::Topic").items():
            assert topic["Properties"].get("KmsMasterKeyId"), logical_id
        for logical_id, group in resources_of_type(template, "AWS::Logs::LogGroup").items():
            # KMS when enable_kms; otherwise CloudWatch Logs' own at-rest encryption, which cannot be switched off.
            assert group["Properties"].get("KmsKeyId") or not any_app.config.enable_kms, logical_id


def test_repository_holds_no_credentials_or_foreign_account_ids() -> None:
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=PROJECT_ROOT, capture_output=True, check=True
                             ).stdout.decode().split("\0")
    secret_patterns = {
        "AWS access key id": re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b"),
        "AWS secret access key": re.compile(r"aws_secret_access_key\s*[=:]\s*\S{20,}", re.IGNORECASE),
        "private key": re.compile(r"-----BEGIN (RSA |EC |OPENSSH )?PRIVATE KEY-----"),
    }
    account_id = re.compile(r"(?<![\d.])\b(\d{12})\b(?![.\d])")
    allowed_accounts = _dlc_registry_accounts() | PLACEHOLDER_ACCOUNTS
    problems = []
    for name in filter(None, tracked):
        path = PROJECT_ROOT / name
        if not path.is_file() or path.stat().st_size > 2_000_000:
            continue
        text = path.read_text(errors="ignore")
        problems += [f"{name}: {label}" for label, pattern in secret_patterns.items() if pattern.search(text)]
        problems += [f"{name}: account id {account}" for account in account_id.findall(text)
                     if account not in allowed_accounts]
    assert problems == [], "remove these from the repository:\n" + "\n".join(problems)
