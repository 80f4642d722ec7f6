"""Where a registered model is served: the AWS PyTorch inference container nearest the training framework, resolved
offline from the SageMaker SDK's tables, as the training image is (stacks/training_image.py)."""

from __future__ import annotations

from dataclasses import dataclass

from packaging.version import Version

from stacks.config import ConfigError, PipelineConfig
from stacks.sagemaker_sdk import sdk_module


@dataclass(frozen=True)
class InferenceImage:
    uri: str
    framework_version: str  # of the inference container: the training one, or the newest older one AWS serves


def serving_framework_version(framework_version: str, python_version: str) -> str:
    """The newest PyTorch inference container release not newer than `framework_version`, for the same Python.

    The artifact carries its own code and rebuilds the model from its weights (docs/scoring.md), so an older torch
    serves it; the same Python keeps the code's syntax and the pinned wheels of code/requirements.txt valid. AWS
    ships fewer inference than training releases (the SDK knows training 2.8.0 but inference up to 2.6.0).
    """
    versions = sdk_module("image_uris").config_for_framework("pytorch")["inference"]["versions"]
    served = [version for version, entry in versions.items()
              if python_version in entry.get("py_versions", []) and Version(version) <= Version(framework_version)]
    if not served:
        raise ConfigError(f"no AWS PyTorch inference container for python_version={python_version!r} up to "
                          f"framework_version={framework_version!r}: choose a framework_version the serving line "
                          f"has for that Python ({sorted(versions, key=Version)[-3:]} are its newest)")
    return max(served, key=Version)


def resolve_inference_image(config: PipelineConfig) -> InferenceImage:
    """The PyTorch inference DLC for the configured region, Python and `inference_instance_type` (CPU or GPU).

    With `image_source=custom` too: the custom image is built on the training DLC and has no model server.
    """
    version = serving_framework_version(config.framework_version, config.python_version)
    try:
        uri = sdk_module("image_uris").retrieve(framework="pytorch", region=config.region, version=version,
                                        py_version=config.python_version,
                                        instance_type=config.inference_instance_type, image_scope="inference")
    except ValueError as error:
        raise ConfigError(f"no AWS PyTorch inference container {version}/{config.python_version} for "
                          f"region={config.region!r}, inference_instance_type="
                          f"{config.inference_instance_type!r}: {error}") from None
    return InferenceImage(uri=uri, framework_version=version)
