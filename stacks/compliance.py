"""Accepted findings of the template checks, each with its reason: cdk-nag acknowledgements, checkov skips.

AwsSolutions-IAM5 reports each wildcard separately (`Action::s3:GetObject*`, `Resource::<arn>/datasets/*`)
and only an acknowledgement naming that exact finding silences it, so a new wildcard still fails synthesis.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from aws_cdk import Acknowledgment, CfnResource, Stack, Validations
from constructs import IConstruct


def acknowledge(construct: IConstruct, rule: str, reason: str) -> None:
    """Accept a whole rule (e.g. `AwsSolutions-S1`) for `construct` and everything below it."""
    Validations.of(construct).acknowledge(Acknowledgment(id=f"AwsSolutions::{rule}", reason=reason))


def acknowledge_wildcards(construct: IConstruct, *, reason: str, actions: Iterable[str] = (),
                          resources: Iterable[str] = ()) -> None:
    """Accept these wildcard actions and resources (tokens allowed) in `construct`'s policies, and no others."""
    stack = Stack.of(construct)
    findings = [f"Action::{action}" for action in actions]
    findings += [f"Resource::{flatten_reference(stack.resolve(resource))}" for resource in resources]
    Validations.of(construct).acknowledge(*(
        Acknowledgment(id=f"AwsSolutions::AwsSolutions-IAM5[{finding}]", reason=reason) for finding in findings))


def skip_checkov(resource: CfnResource, check_id: str, reason: str) -> None:
    """Skip one checkov check on one resource (checkov reads `Metadata.checkov.skip` in the template)."""
    metadata = resource.get_metadata("checkov") or {"skip": []}
    metadata["skip"].append({"id": check_id, "comment": reason})
    resource.add_metadata("checkov", metadata)


# The Lambdas CDK itself adds (bucket notifications, auto-delete on destroy) run once per deployment.
_CDK_PROVIDED_FUNCTION_IDS = ("BucketNotificationsHandler", "Custom::")
_CDK_FUNCTION_SKIPS = {
    "CKV_AWS_115": "CDK-provided deployment-time handler: runs once per deployment, concurrency is not a risk",
    "CKV_AWS_116": "CDK-provided deployment-time handler: CloudFormation retries and reports its failures",
    "CKV_AWS_117": "CDK-provided deployment-time handler: talks to AWS APIs only, a VPC would add nothing",
}
# Only for a handler that has environment variables (BucketDeployment's).
_CDK_FUNCTION_ENVIRONMENT_SKIP = ("CKV_AWS_173", "CDK-provided deployment-time handler: its environment holds "
                                                 "CDK's own settings, no secret")


def skip_checkov_on_cdk_provided_functions(stack: Stack) -> None:
    for construct in stack.node.find_all():
        if (isinstance(construct, CfnResource) and construct.cfn_resource_type == "AWS::Lambda::Function"
                and any(part.startswith(_CDK_PROVIDED_FUNCTION_IDS) for part in construct.node.path.split("/"))):
            for check_id, reason in _CDK_FUNCTION_SKIPS.items():
                skip_checkov(construct, check_id, reason)
            if getattr(construct, "environment", None) is not None:  # a CfnFunction with variables
                skip_checkov(construct, *_CDK_FUNCTION_ENVIRONMENT_SKIP)


def flatten_reference(value: Any) -> str:
    """A resolved CloudFormation value as cdk-nag writes it in findings (its `flattenCfnReference`)."""
    if isinstance(value, str):
        return value.replace("${", "<").replace("}", ">")
    if "Fn::Join" in value:
        delimiter, items = value["Fn::Join"]
        return delimiter.join(flatten_reference(item) for item in items)
    if "Fn::Sub" in value:
        return flatten_reference(value["Fn::Sub"])
    if "Fn::GetAtt" in value:
        resource, attribute = value["Fn::GetAtt"]
        return f"<{flatten_reference(resource)}.{flatten_reference(attribute)}>"
    if "Fn::ImportValue" in value:
        return flatten_reference(value["Fn::ImportValue"])
    if "Ref" in value:
        return f"<{flatten_reference(value['Ref'])}>"
    raise ValueError(f"cannot name the cdk-nag finding for {value!r}: acknowledge it with a literal instead")
