"""The registered package's InferenceSpecification equals what the real SageMaker Python SDK v2 (sagemaker==2.257.7)
sends when it registers the same artifact with `PyTorchModel(...).register(...)`.

The SDK is asked for a model whose code is inside the artifact (code/inference.py, the handler every job writes):
`env` names the handler and /opt/ml/model/code, where SageMaker unpacks model.tar.gz's code/ folder. The SDK runs
offline: a real botocore client behind a Stubber, its default bucket on moto.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from model_registration.registration import SERVING_ENVIRONMENT, plan_registration
from model_registration.settings import settings_from_environ

from registrar.samples import load, stack_environ

from sagemaker_sdk import SDK_CONFIG, sagemaker
from sagemaker.pytorch import PyTorchModel

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning:sagemaker.*"),
              pytest.mark.usefixtures("sdk_config_checked_once")]


def _sdk_package_request(aws_mock: Callable[[], AbstractContextManager[None]], *, image: str,
                         framework_version: str, model_data: str, instance_type: str, region: str) -> dict[str, Any]:
    with aws_mock():
        boto_session = boto3.Session(region_name=region)
        boto_session.client("s3").create_bucket(Bucket="ranker-artifacts",
                                                CreateBucketConfiguration={"LocationConstraint": region})
        client = boto_session.client("sagemaker")
        sent: list[dict[str, Any]] = []
        client.meta.events.register_first("before-parameter-build.sagemaker.CreateModelPackage",
                                          lambda params, **_: sent.append(dict(params)))
        with Stubber(client) as stubber:
            stubber.add_response("list_model_package_groups", {"ModelPackageGroupSummaryList": []})
            stubber.add_response("create_model_package_group", {
                "ModelPackageGroupArn": f"arn:aws:sagemaker:{region}:123456789012:model-package-group/ranker-web"})
            stubber.add_response("create_model_package", {
                "ModelPackageArn": f"arn:aws:sagemaker:{region}:123456789012:model-package/ranker-web/1"})
            session = sagemaker.Session(boto_session=boto_session, sagemaker_client=client,
                                        sagemaker_config=SDK_CONFIG, default_bucket="ranker-artifacts")
            model = PyTorchModel(model_data=model_data, role="arn:aws:iam::123456789012:role/serving",
                                 image_uri=image, framework_version=framework_version, py_version="py312",
                                 sagemaker_session=session,
                                 env={name: SERVING_ENVIRONMENT[name]
                                      for name in ("SAGEMAKER_PROGRAM", "SAGEMAKER_SUBMIT_DIRECTORY")})
            model.register(model_package_group_name="ranker-web", inference_instances=[instance_type],
                           transform_instances=[instance_type], approval_status="PendingManualApproval")
    [request] = sent
    return request


def test_the_inference_specification_is_the_sdks_for_the_same_artifact(aws_mock):
    # Given the registrar's plan for a completed job, with the stack's serving settings
    environ = stack_environ()
    settings = settings_from_environ(environ)
    plan = plan_registration(load("describe_training_job.json"), {"dataset": "web", "dataset-version": "v1"},
                             settings)
    ours = plan.package_request["InferenceSpecification"]
    # When the SDK registers the same artifact in the same image
    sdk = _sdk_package_request(aws_mock, image=environ["INFERENCE_IMAGE_URI"],
                               framework_version=environ["INFERENCE_FRAMEWORK_VERSION"],
                               model_data=ours["Containers"][0]["ModelDataUrl"],
                               instance_type=environ["INFERENCE_INSTANCE_TYPE"], region=environ["AWS_REGION"])
    # Then the container (image, environment, model, framework) and the instance types are the SDK's
    assert ours == sdk["InferenceSpecification"]
