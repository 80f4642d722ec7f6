"""The registrar's AWS calls: the training job, its tags, the model artifact's members, the Model Registry, the
quality report, the topic."""

from __future__ import annotations

import json
import tarfile
import time
from typing import Any

from botocore.exceptions import ClientError

from model_registration import aws_clients

SUBJECT_LIMIT = 100  # SNS rejects longer subjects
# DescribeModelPackageGroup answers a missing group, and CreateModelPackageGroup an existing one, with a
# ValidationException; only the message tells them apart from a bad request.
_MISSING_GROUP, _EXISTING_GROUP = "does not exist", "already exists"


class Registry:
    """Clients are the execution environment's (created once, on first use) unless the caller passes its own."""

    def __init__(self, *, sagemaker: Any = None, s3: Any = None, sns: Any = None) -> None:
        self._sagemaker = sagemaker or aws_clients.sagemaker_client()
        self._s3 = s3 or aws_clients.s3_client()
        self._sns = sns or aws_clients.sns_client()

    def describe_training_job(self, job_name: str) -> dict[str, Any]:
        return self._sagemaker.describe_training_job(TrainingJobName=job_name)

    def describe_tuning_job(self, job_name: str) -> dict[str, Any]:
        return self._sagemaker.describe_hyper_parameter_tuning_job(HyperParameterTuningJobName=job_name)

    def training_job_tags(self, job_arn: str) -> dict[str, str]:
        """DescribeTrainingJob leaves tags out; ListTags pages through them."""
        tags: dict[str, str] = {}
        request = {"ResourceArn": job_arn}
        while True:
            page = self._sagemaker.list_tags(**request)
            tags |= {tag["Key"]: tag["Value"] for tag in page.get("Tags", [])}
            if not page.get("NextToken"):
                return tags
            request["NextToken"] = page["NextToken"]

    def ensure_model_package_group(self, name: str, description: str) -> None:
        """Create the group on first use; a group another invocation created meanwhile is as good."""
        try:
            self._sagemaker.describe_model_package_group(ModelPackageGroupName=name)
            return
        except ClientError as error:
            if not _is_validation_error(error, _MISSING_GROUP):
                raise
        try:
            self._sagemaker.create_model_package_group(ModelPackageGroupName=name,
                                                       ModelPackageGroupDescription=description)
        except ClientError as error:
            if not _is_validation_error(error, _EXISTING_GROUP):
                raise

    def archive_holds(self, uri: str, member: str, read_until: float) -> bool | None:
        """Whether the gzipped tar archive at `uri` (a model.tar.gz) has `member`: the archive is read as a stream up
        to that member, or to its end when it lacks it, and never held whole in memory. None when `read_until` (a
        time.monotonic() deadline) passes first: an archive of many gigabytes can outlast the invocation."""
        bucket, key = _bucket_and_key(uri)
        body = self._s3.get_object(Bucket=bucket, Key=key)["Body"]
        try:
            with tarfile.open(fileobj=_ReadUntil(body, read_until), mode="r|gz") as archive:
                return any(entry.name.removeprefix("./") == member for entry in archive)
        except _DeadlinePassed:
            return None
        finally:
            body.close()

    def put_json(self, uri: str, document: dict[str, Any]) -> None:
        bucket, key = _bucket_and_key(uri)
        self._s3.put_object(Bucket=bucket, Key=key, Body=json.dumps(document, indent=2).encode(),
                            ContentType="application/json")

    def create_model_package(self, request: dict[str, Any]) -> str:
        return self._sagemaker.create_model_package(**request)["ModelPackageArn"]

    def notify(self, topic_arn: str, subject: str, message: dict[str, Any]) -> None:
        self._sns.publish(TopicArn=topic_arn, Subject=subject[:SUBJECT_LIMIT],
                          Message=json.dumps(message, indent=2, default=str))


class _DeadlinePassed(Exception):
    pass


class _ReadUntil:
    """A stream that stops being read at a deadline, checked at each read (tarfile reads in blocks of 10 KiB)."""

    def __init__(self, stream: Any, deadline: float) -> None:
        self._stream, self._deadline = stream, deadline

    def read(self, size: int = -1) -> bytes:
        if time.monotonic() >= self._deadline:
            raise _DeadlinePassed
        return self._stream.read(size)


def _bucket_and_key(uri: str) -> tuple[str, str]:
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return bucket, key


def _is_validation_error(error: ClientError, message_part: str) -> bool:
    details = error.response.get("Error", {})
    return details.get("Code") == "ValidationException" and message_part in details.get("Message", "")
