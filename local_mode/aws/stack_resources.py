"""The stacks' resources made real on the local endpoints, and the template tokens resolved to them.

A bucket becomes a moto bucket named `<stack>-<logical id>` (lowercase), a topic a moto topic, a role an ARN
in the local account; `Ref`, `Fn::GetAtt`, `Fn::ImportValue`, `Fn::Join`, `Fn::Sub` resolve to those names.
File assets (the training source bundle) are uploaded where the template says they live, and a BucketDeployment's
folder assets (the model_trainer launch's files) unpacked where it puts them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from local_mode.aws.local_clients import LOCAL_REGION, local_account_id, local_client

PSEUDO_PARAMETERS = {"AWS::Region": LOCAL_REGION, "AWS::Partition": "aws", "AWS::URLSuffix": "amazonaws.com"}


@dataclass(frozen=True)
class LambdaFunction:
    """What the Lambda service needs to run a function of the template: its deployed code and configuration."""

    code_dir: Path  # the staged asset folder `cdk deploy` zips and uploads
    handler: str  # `module.function`
    environment: dict[str, str]  # resolved to the local resources
    schedule: str | None = None  # the `rate(...)` / `cron(...)` of an EventBridge rule that invokes it, if any


class LocalStackResources:
    def __init__(self, assembly: Path, endpoint_url: str) -> None:
        self._assembly = assembly
        self._endpoint_url = endpoint_url
        self._account = local_account_id(endpoint_url)
        self._templates = {path.name.removesuffix(".template.json"): json.loads(path.read_text())
                           for path in sorted(assembly.glob("*.template.json"))}
        self._exports = {output["Export"]["Name"]: (stack, output["Value"])
                         for stack, template in self._templates.items()
                         for output in template.get("Outputs", {}).values() if "Export" in output}
        self._physical: dict[tuple[str, str], str] = {}

    def lambda_function(self, marker_variable: str, *, required: bool = True) -> LambdaFunction | None:
        """The one Lambda function whose environment holds `marker_variable`, resolved to local resources; None when
        there is none and it is not `required` (a function a configuration key turns off)."""
        found = self._function_with(marker_variable)
        if found is not None:
            stack, logical_id = found
            template = self._templates[stack]
            properties = template["Resources"][logical_id]["Properties"]
            return LambdaFunction(
                code_dir=self._asset_folder(self.resolve(stack, properties["Code"]["S3Key"])),
                handler=properties["Handler"],
                environment={name: self.resolve(stack, value)
                             for name, value in properties["Environment"]["Variables"].items()},
                schedule=self._schedule_of(template, logical_id))
        if not required:
            return None
        raise LookupError(f"no Lambda function in {self._assembly} has {marker_variable} in its environment: "
                          "is the trigger function still in the stacks?")

    def event_patterns_targeting(self, marker_variable: str) -> list[dict[str, Any]]:
        """The event patterns of the EventBridge rules that invoke the function whose environment holds
        `marker_variable` (local_mode.aws.event_rules matches events against them)."""
        found = self._function_with(marker_variable)
        if found is None:
            return []
        stack, logical_id = found
        return [resource["Properties"]["EventPattern"] for resource in self._templates[stack]["Resources"].values()
                if resource["Type"] == "AWS::Events::Rule" and "EventPattern" in resource.get("Properties", {})
                and any(target["Arn"] == {"Fn::GetAtt": [logical_id, "Arn"]}
                        for target in resource["Properties"].get("Targets", []))]

    def _function_with(self, marker_variable: str) -> tuple[str, str] | None:
        for stack, template in self._templates.items():
            for logical_id, resource in template["Resources"].items():
                variables = resource.get("Properties", {}).get("Environment", {}).get("Variables", {})
                if resource["Type"] == "AWS::Lambda::Function" and marker_variable in variables:
                    return stack, logical_id
        return None

    @staticmethod
    def _schedule_of(template: dict[str, Any], function_id: str) -> str | None:
        for resource in template["Resources"].values():
            properties = resource.get("Properties", {})
            if (resource["Type"] == "AWS::Events::Rule" and "ScheduleExpression" in properties
                    and any(target["Arn"] == {"Fn::GetAtt": [function_id, "Arn"]}
                            for target in properties.get("Targets", []))):
                return properties["ScheduleExpression"]
        return None

    def _asset_folder(self, object_key: str) -> Path:
        """The staged folder of the `zip` asset published under `object_key`."""
        for manifest in sorted(self._assembly.glob("*.assets.json")):
            for asset in json.loads(manifest.read_text()).get("files", {}).values():
                keys = {destination["objectKey"] for destination in asset["destinations"].values()}
                if asset["source"].get("packaging") == "zip" and object_key in keys:
                    return self._assembly / asset["source"]["path"]
        raise LookupError(f"no zip asset in {self._assembly} is published as {object_key!r}: a function's "
                          "Code.S3Key and a BucketDeployment's SourceObjectKeys name folder assets of the assembly")

    def publish_file_assets(self) -> None:
        """Upload every `file` asset to its (local) bootstrap bucket and key, as `cdk deploy` publishes them."""
        s3 = local_client("s3", self._endpoint_url)
        for manifest in sorted(self._assembly.glob("*.assets.json")):
            for asset in json.loads(manifest.read_text()).get("files", {}).values():
                if asset["source"].get("packaging") != "file":
                    continue
                for destination in asset["destinations"].values():
                    bucket = self._substitute("", destination["bucketName"])
                    if bucket not in {entry["Name"] for entry in s3.list_buckets()["Buckets"]}:
                        s3.create_bucket(Bucket=bucket)
                    s3.upload_file(str(self._assembly / asset["source"]["path"]), bucket,
                                   self._substitute("", destination["objectKey"]))

    def run_bucket_deployments(self) -> None:
        """Put each BucketDeployment's files in its destination bucket under its key prefix, as CDK's handler unpacks
        the deployment's zipped folder assets at `cdk deploy`."""
        s3 = local_client("s3", self._endpoint_url)
        for stack, template in self._templates.items():
            for resource in template["Resources"].values():
                if resource["Type"] != "Custom::CDKBucketDeployment":
                    continue
                properties = resource["Properties"]
                bucket = self.resolve(stack, properties["DestinationBucketName"])
                prefix = self.resolve(stack, properties.get("DestinationBucketKeyPrefix", ""))
                for object_key in properties["SourceObjectKeys"]:
                    folder = self._asset_folder(self.resolve(stack, object_key))
                    for path in sorted(folder.rglob("*")):
                        if path.is_file():
                            s3.upload_file(str(path), bucket, prefix + path.relative_to(folder).as_posix())

    def resolve(self, stack: str, value: Any) -> str:
        if isinstance(value, str):
            return value
        (function, argument), = value.items()
        if function == "Ref":
            return PSEUDO_PARAMETERS.get(argument) or (self._account if argument == "AWS::AccountId"
                                                       else self._reference(stack, argument, "Ref"))
        if function == "Fn::GetAtt":
            return self._reference(stack, argument[0], argument[1])
        if function == "Fn::ImportValue":
            exporter, exported = self._exports[self.resolve(stack, argument)]
            return self.resolve(exporter, exported)
        if function == "Fn::Join":
            separator, parts = argument
            return separator.join(self.resolve(stack, part) for part in parts)
        if function == "Fn::Sub":
            return self._substitute(stack, argument)
        raise ValueError(f"{stack}: local mode cannot resolve {function} ({json.dumps(value)[:200]}); "
                         "add it to local_mode/aws/stack_resources.py")

    def _substitute(self, stack: str, text: str) -> str:
        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            return self.resolve(stack, {"Ref": name} if "." not in name else {"Fn::GetAtt": name.split(".", 1)})
        return re.sub(r"\$\{([^}]+)\}", replace, text)

    def _reference(self, stack: str, logical_id: str, attribute: str) -> str:
        kind = self._templates[stack]["Resources"][logical_id]["Type"]
        name = self._physical.get((stack, logical_id)) or self._create(stack, logical_id, kind)
        arns = {"AWS::S3::Bucket": f"arn:aws:s3:::{name}",
                "AWS::IAM::Role": f"arn:aws:iam::{self._account}:role/{name}",
                "AWS::KMS::Key": f"arn:aws:kms:{LOCAL_REGION}:{self._account}:key/{name}"}
        if attribute == "Ref":
            return name
        if attribute == "Arn" and kind in arns:
            return arns[kind]
        raise ValueError(f"{stack}/{logical_id} ({kind}): local mode has no value for {attribute}")

    def _create(self, stack: str, logical_id: str, kind: str) -> str:
        name = f"{stack}-{logical_id}".lower()[:63]
        if kind == "AWS::S3::Bucket":
            local_client("s3", self._endpoint_url).create_bucket(Bucket=name)
        elif kind == "AWS::SNS::Topic":
            name = local_client("sns", self._endpoint_url).create_topic(Name=name[:256])["TopicArn"]
        self._physical[(stack, logical_id)] = name
        return name
