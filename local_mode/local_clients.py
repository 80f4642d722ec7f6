"""boto3 clients for the local endpoints: dummy credentials, one region, an explicit endpoint URL."""

from __future__ import annotations

from typing import Any

import boto3

LOCAL_REGION = "us-east-1"

# Local endpoints accept any credentials; these only keep botocore from looking for real ones.
DUMMY_CREDENTIALS = {"aws_access_key_id": "local", "aws_secret_access_key": "local"}


def local_client(service: str, endpoint_url: str) -> Any:
    """A boto3 client for `service` that talks to `endpoint_url` only."""
    return boto3.session.Session().client(
        service, endpoint_url=endpoint_url, region_name=LOCAL_REGION, **DUMMY_CREDENTIALS
    )


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
