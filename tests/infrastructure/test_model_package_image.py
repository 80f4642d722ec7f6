"""A registered model package deploys: its container is the AWS PyTorch inference image nearest the training
framework, with the environment the inference toolkit needs to run the artifact's own `code/inference.py`."""

from __future__ import annotations

import re
from typing import Any

import pytest
from model_registration.registration import Registration, plan_registration
from model_registration.settings import settings_from_environ
from packaging.version import Version

from stacks.sagemaker_sdk import sdk_module

from .iam_policy import resolve
from .synthesis import SynthesizedApp, function_of_service, resources_of_type

_IMAGE = re.compile(r"^\d{12}\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com/(?P<repository>[^:]+):"
                    r"(?P<version>[\d.]+)-(?P<processor>cpu|gpu)-(?P<py>py\d+)$")


def _registrar_environment(app: SynthesizedApp) -> dict[str, str]:
    variables = function_of_service(app.stateless, "model-registration")["Properties"]["Environment"]["Variables"]
    resolved = resolve(variables, region=app.config.region)
    # The topic's ARN resolves at deployment; any ARN of the right shape stands in for it.
    return {**{name: value for name, value in resolved.items() if isinstance(value, str)},
            "NOTIFICATION_TOPIC_ARN": f"arn:aws:sns:{app.config.region}:123456789012:ranker-training-jobs",
            "AWS_REGION": app.config.region}


def _completed_job(app: SynthesizedApp) -> dict[str, Any]:
    """DescribeTrainingJob of a job the stack's trigger started, in the stack's training image."""
    [trigger] = [function for function in resources_of_type(app.stateless, "AWS::Lambda::Function").values()
                 if "TRAINING_IMAGE_URI" in function["Properties"].get("Environment", {}).get("Variables", {})]
    job = f"{app.config.project_prefix}-web-v1-0123456789"
    return {
        "TrainingJobName": job,
        "TrainingJobArn": f"arn:aws:sagemaker:{app.config.region}:123456789012:training-job/{job}",
        "AlgorithmSpecification": {"TrainingImage": trigger["Properties"]["Environment"]["Variables"][
            "TRAINING_IMAGE_URI"]},
        "ModelArtifacts": {"S3ModelArtifacts": f"s3://ranker-artifacts/models/{job}/output/model.tar.gz"},
        "FinalMetricDataList": [],
    }


@pytest.mark.parametrize("env_name", ["dev", "prod"])
def test_a_registered_package_names_the_nearest_pytorch_inference_image(env_name, request) -> None:
    # Given a stack's registrar, and a job its trigger ran in the stack's training image
    app: SynthesizedApp = request.getfixturevalue(f"{env_name}_app")
    settings = settings_from_environ(_registrar_environment(app))
    description = _completed_job(app)
    # When the registrar plans the job's package
    plan = plan_registration(description, {"dataset": "web", "dataset-version": "v1"}, settings)
    assert isinstance(plan, Registration), plan
    [container] = plan.package_request["InferenceSpecification"]["Containers"]
    # Then its image is a PyTorch inference container, not the training image (which has no model server)
    image = _IMAGE.match(container["Image"])
    assert image and image["repository"] == "pytorch-inference", container["Image"]
    # with the job's Python, and the newest serving framework not newer than the training one
    config = app.config
    assert image["py"] == config.python_version
    served, trained = Version(image["version"]), Version(config.framework_version)
    serving_line = sdk_module("image_uris").config_for_framework("pytorch")["inference"]["versions"]
    nearer = [version for version, entry in serving_line.items()
              if served < Version(version) <= trained and config.python_version in entry.get("py_versions", [])]
    assert served <= trained and nearer == [], (container["Image"], nearer)
    # and the inference toolkit runs the artifact's own handler: code/inference.py in the unpacked model
    assert container["Environment"]["SAGEMAKER_PROGRAM"] == "inference.py"
    assert container["Environment"]["SAGEMAKER_SUBMIT_DIRECTORY"] == "/opt/ml/model/code"
    assert container["ModelDataUrl"] == description["ModelArtifacts"]["S3ModelArtifacts"]
