"""The watchdog's AWS calls: the project's running jobs, their log streams, StopTrainingJob, the topic."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

from botocore.exceptions import ClientError

from job_watchdog import aws_clients
from job_watchdog.stall import IN_PROGRESS, StreamRead

PAGE_SIZE = 100  # ListTrainingJobs' largest page
# GetLogEvents may answer with an empty page and a new token while older events exist; a stream is read back at most
# this many pages, after which its newest line is unknown.
MAX_EMPTY_PAGES = 5


def _moment(milliseconds: int | None) -> datetime | None:
    return datetime.fromtimestamp(milliseconds / 1000, timezone.utc) if milliseconds else None


def _milliseconds(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


class JobsAndLogs:
    """Clients are the execution environment's (created once, on first use) unless the caller passes its own."""

    def __init__(self, log_group: str, *, sagemaker: Any = None, logs: Any = None, sns: Any = None) -> None:
        self._log_group = log_group
        self._sagemaker = sagemaker or aws_clients.sagemaker_client()
        self._logs = logs or aws_clients.logs_client()
        self._sns = sns or aws_clients.sns_client()

    def running_jobs(self, project_prefix: str) -> list[str]:
        """Names of the project's `<prefix>-*` jobs that are InProgress (a Stopping job is not)."""
        names, request = [], {"StatusEquals": IN_PROGRESS, "NameContains": f"{project_prefix}-",
                              "MaxResults": PAGE_SIZE}
        while True:
            page = self._sagemaker.list_training_jobs(**request)
            names += [job["TrainingJobName"] for job in page.get("TrainingJobSummaries", [])
                      if job["TrainingJobName"].startswith(f"{project_prefix}-")]
            if not page.get("NextToken"):
                return names
            request["NextToken"] = page["NextToken"]

    def describe(self, job_name: str) -> dict[str, Any]:
        return self._sagemaker.describe_training_job(TrainingJobName=job_name)

    def listed_streams(self, job_name: str) -> dict[str, datetime | None]:
        """The job's streams, each with the newest line DescribeLogStreams lists (`lastEventTimestamp`), None before
        it lists one. CloudWatch updates it eventually, typically in less than an hour and in rare cases later (the
        LogStream reference), so it can lag behind a stream's lines, never run ahead of them. It is the line's own
        timestamp, the clock GetLogEvents' events and `startTime` use; `lastIngestionTime`, when CloudWatch received
        the line, is as eventual and on another clock, so it is not used."""
        streams: dict[str, datetime | None] = {}
        request = {"logGroupName": self._log_group, "logStreamNamePrefix": f"{job_name}/"}
        while True:
            try:
                page = self._logs.describe_log_streams(**request)
            except ClientError as error:
                if error.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
                    return streams  # no job in the account has logged yet
                raise
            for stream in page.get("logStreams", []):
                streams[stream["logStreamName"]] = _moment(stream.get("lastEventTimestamp"))
            if not page.get("nextToken"):
                return streams
            request["nextToken"] = page["nextToken"]

    def newest_line(self, stream: str, since: datetime) -> StreamRead:
        """The stream's newest line at or after `since`, read back from its end one event a page. `startTime` keeps
        the read to that range, which the API reference advises against empty pages; an empty page is followed by
        its `nextBackwardToken` until the token comes back unchanged (the start of the range)."""
        request: dict[str, Any] = {"logGroupName": self._log_group, "logStreamName": stream,
                                   "startTime": _milliseconds(since), "startFromHead": False, "limit": 1}
        for _ in range(MAX_EMPTY_PAGES):
            page = self._logs.get_log_events(**request)
            if page.get("events"):
                return StreamRead(since, _moment(max(event["timestamp"] for event in page["events"])), True)
            token = page.get("nextBackwardToken")
            if not token or token == request.get("nextToken"):
                return StreamRead(since, None, True)
            request["nextToken"] = token
        return StreamRead(since, None, False)

    def stop(self, job_name: str) -> bool:
        """StopTrainingJob; False when SageMaker refuses because the job is no longer in progress (another run or a
        person stopped it first, or it ended)."""
        try:
            self._sagemaker.stop_training_job(TrainingJobName=job_name)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == "ValidationException":
                return False
            raise
        return True

    def notify(self, topic_arn: str, subject: str, message: dict[str, Any]) -> None:
        self._sns.publish(TopicArn=topic_arn, Subject=subject, Message=json.dumps(message, indent=2))
