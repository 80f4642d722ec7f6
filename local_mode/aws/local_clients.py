"""boto3 clients for the local endpoints: dummy credentials, one region, an explicit endpoint URL."""

from __future__ import annotations

import threading
from functools import cache
from typing import Any

import boto3

LOCAL_REGION = "us-east-1"

# Local endpoints accept any credentials; these only keep botocore from looking for real ones.
DUMMY_CREDENTIALS = {"aws_access_key_id": "local", "aws_secret_access_key": "local"}

# A session is not safe to create clients from in two threads at once; the clients it makes are.
_SESSION_LOCK = threading.Lock()


@cache
def _session() -> boto3.session.Session:
    """One session for every local client: it loads each service's model once (a fresh session reads and parses the
    JSON again, most of a second for SageMaker's), and each client still gets its own event hooks."""
    return boto3.session.Session()


def local_client(service: str, endpoint_url: str) -> Any:
    """A boto3 client for `service` that talks to `endpoint_url` only."""
    with _SESSION_LOCK:
        return _session().client(service, endpoint_url=endpoint_url, region_name=LOCAL_REGION, **DUMMY_CREDENTIALS)


def dummy_credentials_environment() -> dict[str, str]:
    """The same credentials and region as environment variables, for code that builds its own clients."""
    return {
        "AWS_ACCESS_KEY_ID": DUMMY_CREDENTIALS["aws_access_key_id"],
        "AWS_SECRET_ACCESS_KEY": DUMMY_CREDENTIALS["aws_secret_access_key"],
        "AWS_DEFAULT_REGION": LOCAL_REGION,
        "AWS_REGION": LOCAL_REGION,
    }


def local_account_id(endpoint_url: str) -> str:
    """The account the local endpoint pretends to be (moto's STS answers; nothing real is involved)."""
    return local_client("sts", endpoint_url).get_caller_identity()["Account"]
