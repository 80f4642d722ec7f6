"""Where the training image comes from: the AWS PyTorch DLC, resolved offline from the SageMaker SDK's tables."""

from __future__ import annotations

import re
from dataclasses import dataclass

from stacks.config import ConfigError, PipelineConfig
from stacks.sagemaker_sdk import sdk_module

_ECR_IMAGE_URI = re.compile(r"^(?P<account>\d{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(\.cn)?/"
                            r"(?P<repository>[^:@]+)[:@].+$")


@dataclass(frozen=True)
class DlcImage:
    """An AWS Deep Learning Container image; the execution role may pull only this repository."""

    uri: str
    registry_account: str
    region: str
    repository_name: str


def resolve_dlc_image(config: PipelineConfig) -> DlcImage:
    """The PyTorch training DLC for the configured region, framework, Python version and instance type."""
    try:
        uri = sdk_module("image_uris").retrieve(framework="pytorch", region=config.region,
                                        version=config.framework_version, py_version=config.python_version,
                                        instance_type=config.instance_type, image_scope="training")
    except ValueError as error:
        raise ConfigError(
            f"no AWS PyTorch DLC for framework_version={config.framework_version!r}, "
            f"python_version={config.python_version!r}, region={config.region!r}, "
            f"instance_type={config.instance_type!r}: {error}"
        ) from None
    match = _ECR_IMAGE_URI.match(uri)
    if match is None:
        raise ConfigError(f"the SageMaker SDK returned {uri!r}, not an ECR image URI; pin a known SDK version")
    return DlcImage(uri=uri, registry_account=match["account"], region=match["region"],
                    repository_name=match["repository"])
