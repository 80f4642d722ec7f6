"""The AWS clients the project's Lambdas use, each created once per execution environment, on first use (the
registrar and the watchdog link this module into their packages).

botocore rather than boto3: boto3 adds s3transfer and ~100 ms to the cold start and nothing the functions need.
Creation waits for first use because loading a service model costs ~130 ms, which `import handler` should not pay
in tests and tools that never call AWS. Endpoints follow AWS_ENDPOINT_URL_<SERVICE> (local mode, moto).
"""

from __future__ import annotations

import functools

import botocore.session
from botocore.config import Config

# Standard mode: throttling and transient errors are retried with full-jitter exponential backoff (waits of at most
# 1, 2, 4, 8, 16 s). Not adaptive mode: its client-side rate limiter learns only inside one execution environment
# (Lambda runs many side by side), and under sustained throttling it made one invocation hold 22-29 s of the
# function's 60 s instead of 12-20 s (measured against a local endpoint); Lambda's own asynchronous retries, minutes
# apart, are what spreads a burst out.
SAGEMAKER_ATTEMPTS = 6  # the first call and five retries
SAGEMAKER_RETRIES = Config(retries={"mode": "standard", "total_max_attempts": SAGEMAKER_ATTEMPTS})


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


# CloudWatch Logs (the watchdog's reads): standard mode set here, not left to botocore's default, which older releases
# (a Lambda runtime may bundle one) keep at legacy mode (boto/botocore#3513 changed it) and AWS_RETRY_MODE /
# AWS_MAX_ATTEMPTS can change. A read still throttled after these attempts leaves its one job unchecked for a sweep.
LOGS_RETRIES = Config(retries={"mode": "standard", "total_max_attempts": 3})


@functools.cache
def logs_client():
    return _session().create_client("logs", config=LOGS_RETRIES)
