"""Lambda's asynchronous invocation contract, emulated in this process for one function.

As AWS documents it: the queued event runs the function; on an error Lambda runs it up to `retry_attempts` more
times (the stack sets 2, the most Lambda allows); when every attempt failed, the on-failure destination receives an
invocation record holding the event unchanged as `requestPayload`:

    {"version": "1.0", "timestamp": ..., "requestContext": {"requestId", "functionArn", "condition":
     "RetriesExhausted", "approximateInvokeCount"}, "requestPayload": <event>, "responseContext": {"statusCode": 200,
     "executedVersion": "$LATEST", "functionError": "Unhandled"}, "responsePayload": {"errorMessage", "errorType",
     "stackTrace"}}

The waits between attempts (about one and two minutes) are skipped: they change when, not whether.
"""

from __future__ import annotations

import datetime as dt
import json
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

LambdaFunction = Callable[[dict[str, Any], Any], Any]


@dataclass(frozen=True)
class LambdaContext:
    """The fields of the runtime's context object that Powertools reads."""

    invoked_function_arn: str
    function_name: str = "training-trigger"
    function_version: str = "$LATEST"
    memory_limit_in_mb: int = 256
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    @staticmethod
    def get_remaining_time_in_millis() -> int:
        return 60_000


@dataclass(frozen=True)
class AsyncOutcome:
    attempts: int
    result: Any = None  # the successful attempt's return value
    errors: tuple[str, ...] = ()  # "<type>: <message>" of each failed attempt
    destination_message_id: str | None = None  # set when the event went to the on-failure destination


class AsyncInvoker:
    """Invokes `function` as Lambda invokes it for an asynchronous event source (S3, EventBridge)."""

    def __init__(self, function: LambdaFunction, *, function_arn: str, sqs: Any, on_failure_queue_url: str,
                 retry_attempts: int = 2) -> None:
        self.function, self.function_arn = function, function_arn
        self.sqs, self.on_failure_queue_url = sqs, on_failure_queue_url
        self.retry_attempts = retry_attempts

    def invoke(self, payload: bytes) -> AsyncOutcome:
        """Run the event (the JSON bytes the service queued) until it succeeds or its retries run out."""
        request_id = str(uuid.uuid4())
        failures: list[Exception] = []
        for attempt in range(1, self.retry_attempts + 2):
            context = LambdaContext(invoked_function_arn=self.function_arn, aws_request_id=request_id)
            try:
                # Each attempt gets its own copy of the event, parsed from the queued bytes.
                result = self.function(json.loads(payload), context)
            except Exception as error:  # noqa: BLE001 (any function error is an "Unhandled" failure to Lambda)
                failures.append(error)
                continue
            return AsyncOutcome(attempts=attempt, result=result, errors=_described(failures))
        record = self._failure_record(request_id, payload, failures[-1], attempts=len(failures))
        sent = self.sqs.send_message(QueueUrl=self.on_failure_queue_url, MessageBody=json.dumps(record))
        return AsyncOutcome(attempts=len(failures), errors=_described(failures),
                            destination_message_id=sent["MessageId"])

    def _failure_record(self, request_id: str, payload: bytes, error: Exception, *, attempts: int) -> dict[str, Any]:
        return {
            "version": "1.0",
            "timestamp": dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "requestContext": {"requestId": request_id, "functionArn": f"{self.function_arn}:$LATEST",
                               "condition": "RetriesExhausted", "approximateInvokeCount": attempts},
            "requestPayload": json.loads(payload),
            "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
            "responsePayload": {"errorMessage": str(error), "errorType": type(error).__name__,
                                "stackTrace": traceback.format_exception(error)},
        }


def _described(failures: list[Exception]) -> tuple[str, ...]:
    return tuple(f"{type(error).__name__}: {error}" for error in failures)
