"""The trigger's environment, resolved as CloudFormation would resolve it, stays under Lambda's 4 KB limit.

AWS Lambda allows 4 KB for all of a function's environment variables together, not adjustable (Lambda quotas,
https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html, Service Quotas L-6581F036). The API measures
the variables as one compact JSON object: its refusal reads "...exceeded the 4KB limit. String measured:
{"KEY":"value",...}". No local tool resolves a template, so this test does: every reference becomes the longest
value AWS allows for it, on the largest configuration docs/configuration.md documents.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from training_trigger.job_names import longest_tuning_prefix

from .synthesis import FOREIGN_CODE, SynthesizedApp, config_for, synthesize, trigger_function

LAMBDA_ENVIRONMENT_LIMIT_BYTES = 4096
ACCOUNT = "123456789012"
PARTITION = "aws-us-gov"  # the longest partition name
URL_SUFFIX = "amazonaws.com.cn"  # the longest URL suffix
KEY_ID = "1234abcd-12ab-34cd-56ef-1234567890ab"
# The longest names AWS allows: S3 buckets 63, IAM roles 64, SNS topics 256, ECR repositories 256 characters.
LONGEST_NAMES = {"bucket": "b" * 63, "role": "r" * 64, "topic": "t" * 256, "repository": "e" * 256}


def largest_documented_config(region: str = "ap-southeast-2") -> Any:
    """prod with every key that reaches the environment at its longest: the longest prefix synthesis accepts (so that
    tuning job names fit), the custom image
    with a 128-character tag, the KMS key, and everything else the configuration reference allows at once, for a
    script of the user's own (whose hyperparameters are not checked against the ranker's flags)."""
    return config_for(
        "prod", project_prefix="a" * (longest_tuning_prefix() - 1) + "z", region=region, image_source="custom", custom_image_tag="v" * 128,
        enable_kms=True, notification_email="ml-team@example.com",
        subnet_ids=[f"subnet-0{index:016x}" for index in range(16)], security_group_ids=["sg-0123456789abcdef0"] * 5,
        extra_data_buckets=[f"shared-corpus-{index:02d}-" + "c" * 46 for index in range(10)],
        source_dir=str(FOREIGN_CODE), entry_point="train.py",
        default_hyperparameters={f"flag_{index}": "x" * 40 for index in range(60)})


class Resolver:
    """Resolves a synthesized value as CloudFormation would, each reference as the longest value AWS allows."""

    def __init__(self, template: dict[str, Any], region: str):
        self.resources, self.region = template["Resources"], region
        self.pseudo = {"AWS::AccountId": ACCOUNT, "AWS::Region": region, "AWS::Partition": PARTITION,
                       "AWS::URLSuffix": URL_SUFFIX}

    def resolve(self, value: Any) -> str:
        if isinstance(value, str):
            return value
        [(function, argument)] = value.items()
        if function == "Fn::Join":
            separator, parts = argument
            return separator.join(self.resolve(part) for part in parts)
        if function == "Fn::Sub":
            return re.sub(r"\$\{([^}]+)\}", lambda match: self.reference(match[1]), argument)
        if function == "Fn::Select":
            index, items = argument
            return self.resolve_list(items)[int(index)]
        if function == "Fn::ImportValue":
            return self.imported(argument)
        if function == "Ref":
            return self.reference(argument)
        if function == "Fn::GetAtt":
            return self.attribute(*argument)
        pytest.fail(f"{function} in the trigger's environment: teach Resolver its longest value")

    def resolve_list(self, value: Any) -> list[str]:
        if isinstance(value, dict) and "Fn::Split" in value:
            separator, text = value["Fn::Split"]
            return self.resolve(text).split(separator)
        return [self.resolve(item) for item in value]

    def arn(self, service: str, resource: str, *, regional: bool = True) -> str:
        return f"arn:{PARTITION}:{service}:{self.region if regional else ''}:{ACCOUNT}:{resource}"

    def imported(self, export: str) -> str:
        attribute = export.rsplit("-", 1)[-1]
        values = {"KeyArn": self.arn("kms", f"key/{KEY_ID}"),
                  "DataBucketName": LONGEST_NAMES["bucket"], "ArtifactsBucketName": LONGEST_NAMES["bucket"],
                  "DataBucketArn": f"arn:{PARTITION}:s3:::{LONGEST_NAMES['bucket']}",
                  "ArtifactsBucketArn": f"arn:{PARTITION}:s3:::{LONGEST_NAMES['bucket']}",
                  "ImageRepositoryName": LONGEST_NAMES["repository"],
                  "ImageRepositoryArn": self.arn("ecr", f"repository/{LONGEST_NAMES['repository']}")}
        if attribute not in values:
            pytest.fail(f"import {export!r} in the trigger's environment: add its longest value to Resolver")
        return values[attribute]

    def reference(self, name: str) -> str:
        if name in self.pseudo:
            return self.pseudo[name]
        resource_type = self.resources[name]["Type"]
        if resource_type == "AWS::SNS::Topic":  # Ref of a topic is its ARN
            return self.arn("sns", LONGEST_NAMES["topic"])
        pytest.fail(f"Ref to {resource_type} {name} in the trigger's environment: add its longest value to Resolver")

    def attribute(self, name: str, attribute: str) -> str:
        resource_type = self.resources[name]["Type"]
        if (resource_type, attribute) == ("AWS::IAM::Role", "Arn"):
            return self.arn("iam", f"role/{LONGEST_NAMES['role']}", regional=False)
        pytest.fail(f"{resource_type} {name}.{attribute} in the trigger's environment: add its longest value")


def measured_size(variables: dict[str, str]) -> int:
    """The size Lambda checks: the variables as one compact JSON object, in bytes."""
    return len(json.dumps(variables, separators=(",", ":")).encode())


@pytest.fixture(scope="module")
def largest_app(tmp_path_factory: pytest.TempPathFactory) -> SynthesizedApp:
    return synthesize(largest_documented_config(), tmp_path_factory.mktemp("largest"))


def test_the_resolved_environment_of_the_largest_configuration_fits_lambdas_4_kb(largest_app) -> None:
    # Given the largest documented configuration, synthesized
    variables = trigger_function(largest_app.stateless)["Properties"]["Environment"]["Variables"]
    # When every reference is resolved to the longest value AWS allows
    resolver = Resolver(largest_app.stateless, largest_app.config.region)
    resolved = {name: resolver.resolve(value) for name, value in variables.items()}
    # Then Lambda's measure stays under its limit
    size = measured_size(resolved)
    assert size <= LAMBDA_ENVIRONMENT_LIMIT_BYTES, (
        f"the trigger's environment resolves to {size} bytes, over Lambda's {LAMBDA_ENVIRONMENT_LIMIT_BYTES}: move "
        f"settings that synthesis fixes into the bundle's settings file (stacks/trigger_environment.py)")
    # And the references really were resolved to their longest form (the measure would otherwise be too kind)
    assert LONGEST_NAMES["topic"] in resolved["NOTIFICATION_TOPIC_ARN"]
    assert resolved["TRAINING_IMAGE_URI"].endswith(f"/{LONGEST_NAMES['repository']}:{'v' * 128}")


def test_the_static_settings_live_in_the_bundle_not_in_the_environment(largest_app) -> None:
    # Given the largest configuration's environment and bundle settings file
    variables = trigger_function(largest_app.stateless)["Properties"]["Environment"]["Variables"]
    # Then the long static settings went to the file: the environment holds none of their values
    text = json.dumps(variables)
    for value in ("flag_59", "shared-corpus-09-", "subnet-0", "samples_per_second"):
        assert value not in text

