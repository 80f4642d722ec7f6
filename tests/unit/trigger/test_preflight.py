"""Preflight: the service model and the compatibility rules refuse unworkable jobs, naming field and fix."""

from __future__ import annotations

import pytest
from training_trigger.preflight import preflight_errors, service_model_errors
from training_trigger.request import build_training_job_request

from trigger.sample_inputs import job_spec, stack_settings


def _errors(spec, settings):
    return preflight_errors(build_training_job_request(spec, settings), spec, settings)


@pytest.mark.parametrize(
    ("distribution", "instance_type", "count"),
    [
        ("none", "ml.g5.2xlarge", 1),
        ("none", "ml.m5.xlarge", 1),
        ("pytorchddp", "ml.p4d.24xlarge", 2),
        ("smdistributed", "ml.p4de.24xlarge", 1),
        ("torch_distributed", "ml.g5.12xlarge", 1),
        ("torch_distributed", "ml.g5.2xlarge", 4),
    ],
)
def test_workable_jobs_pass(settings, distribution, instance_type, count):
    spec = job_spec(distribution=distribution, instance_type=instance_type, instance_count=count)
    assert _errors(spec, settings) == []


def test_the_service_model_catches_what_the_api_would_refuse(settings):
    # Given a request missing a required field and with a wrong type
    request = build_training_job_request(job_spec(), settings)
    del request["RoleArn"]
    request["ResourceConfig"]["InstanceCount"] = "2"
    # When it is checked against botocore's model
    errors = service_model_errors(request)
    # Then both are named
    assert any("RoleArn" in error for error in errors)
    assert any("InstanceCount" in error for error in errors)


@pytest.mark.parametrize(
    ("changes", "environ", "message"),
    [
        ({"distribution": "pytorchddp", "instance_type": "ml.g5.48xlarge"}, {},
         "needs an SMDDP instance ['ml.p4d.24xlarge', 'ml.p4de.24xlarge', 'ml.p3dn.24xlarge'], not "
         "instance_type='ml.g5.48xlarge'"),
        ({"distribution": "smdistributed", "instance_type": "ml.p5.48xlarge"}, {},
         "SMDDP does not run on p5 unless torchrun launches it; use distribution 'torch_distributed'"),
        ({"distribution": "smdistributed", "instance_type": "ml.p4d.24xlarge"}, {"framework_version": "2.5.1",
                                                                                  "python_version": "py311"},
         "distribution='smdistributed' does not run in the AWS PyTorch 2.5.1 container"),
        ({"distribution": "pytorchddp", "instance_type": "ml.p4d.24xlarge"}, {"python_version": "py27"},
         "python_version='py27' does not match the PyTorch 2.2.0 container, which has py310: use 'py310'"),
        ({}, {"framework_version": "1.13.1", "python_version": "py39"},
         "framework_version='1.13.1' is not a supported AWS PyTorch container: use one of ['2.2.0'"),
        ({"distribution": "torch_distributed", "instance_type": "ml.c5.18xlarge"}, {},
         "'torch_distributed' needs a GPU instance, not instance_type='ml.c5.18xlarge'"),
        ({"distribution": "torch_distributed", "instance_type": "ml.g5.2xlarge"}, {},
         "instance_count=1 has 1: use a multi-GPU instance, raise instance_count"),
        ({"distribution": "pytorchddp", "instance_type": "ml.trn1.32xlarge"}, {},
         "is a Trainium/Inferentia (Neuron) instance: the training code runs on CUDA GPUs and CPUs only"),
        ({"distribution": "torch_distributed", "instance_type": "ml.trn1.32xlarge"}, {},
         "instance_type='ml.trn1.32xlarge' is a Trainium/Inferentia (Neuron) instance"),
        ({"distribution": "none", "instance_type": "ml.inf2.xlarge"}, {},
         "instance_type='ml.inf2.xlarge' is a Trainium/Inferentia (Neuron) instance"),
        ({"job_name": "nightly-web-search"}, {}, "does not start with 'ranker-'"),
        ({"job_name": "ranker-web_search"}, {}, "is not a valid training job name"),
        ({"hyperparameters": {f"h{i}": i for i in range(100)}}, {}, "exceed SageMaker's 100"),
        ({"hyperparameters": {"notes": "x" * 2600}}, {}, "hyperparameters.notes: the encoded value is 2602"),
        ({"tags": {f"t{i}": "v" for i in range(51)}}, {}, "tags: 51 tags"),
        ({"spot": True, "max_runtime": 90000}, {"max_wait_seconds": 86400},
         "max_wait_seconds=86400 is below max_runtime=90000"),
        ({"spot": True}, {"keep_alive_seconds": 600}, "warm pools do not support managed spot training"),
        ({}, {"keep_alive_seconds": 7200}, "keep_alive_seconds=7200 exceeds 3600"),
        ({}, {"job_retry_attempts": 31}, "job_retry_attempts=31 exceeds 30"),
    ],
)
def test_unworkable_jobs_are_refused_with_field_and_fix(changes, environ, message):
    # Given a job that cannot work
    settings = stack_settings(**environ)
    spec = job_spec(**changes)
    # When it is checked
    errors = _errors(spec, settings)
    # Then one error carries the message
    assert any(message in error for error in errors), errors


def test_custom_image_lifts_the_framework_limit_for_smddp():
    settings = stack_settings(framework_version="2.5.1", python_version="py311", image_source="custom")
    spec = job_spec(distribution="smdistributed", instance_type="ml.p4d.24xlarge")
    assert _errors(spec, settings) == []
