"""The AWS clients the trigger uses, each created once per execution environment, on first use.

botocore rather than boto3: boto3 adds s3transfer and ~100 ms to the cold start and nothing the trigger needs.
Creation waits for first use because loading a service model costs ~130 ms, which `import handler` should not pay
in tests and tools that never call AWS. Endpoints follow AWS_ENDPOINT_URL_<SERVICE> (local mode, moto).
"""

from __future__ import annotations

import functools

import botocore.session
from botocore.config import Config

# Adaptive mode adds client-side rate limiting on top of standard retries: a burst of dataset events backs off
# instead of exhausting CreateTrainingJob's request rate.
SAGEMAKER_RETRIES = Config(retries={"mode": "adaptive", "max_attempts": 5})


@functools.cache
def _session() -> botocore.session.Session:
    return botocore.session.get_session()


@functools.cache
def sagemaker_client():
    return _session().create_client("sagemaker", config=SAGEMAKER_RETRIES)


@functools.cache
def s3_client():
    return _session().create_client("s3")


@functools.cache
def sns_client():
    return _session().create_client("sns")
