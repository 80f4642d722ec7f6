"""The local SageMaker endpoint: awsJson1.1 over HTTP on 127.0.0.1, as boto3 speaks it.

boto3 POSTs JSON to `/` with `X-Amz-Target: SageMaker.<Operation>`; errors come back as HTTP 400 with
`{"__type": code, "Message": ...}`. Point real clients at it with `endpoint_url=` or AWS_ENDPOINT_URL_SAGEMAKER.

Training and tuning jobs are served here; the Model Registry calls are relayed unchanged to moto's server (`registry_url`),
which implements model package groups and versioned model packages, so one SageMaker endpoint serves a Lambda
that uses both, as the service does.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
import uuid
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from local_mode.aws.network import LOOPBACK
from local_mode.sagemaker_api.request_validation import validate_request
from local_mode.sagemaker_api.service_errors import ServiceError

CONTENT_TYPE = "application/x-amz-json-1.1"
TARGET_PREFIX = "SageMaker."
# What the registrar calls, and what a test reads back, of the Model Registry.
REGISTRY_OPERATIONS = frozenset({"CreateModelPackageGroup", "DescribeModelPackageGroup", "ListModelPackageGroups",
                                 "CreateModelPackage", "DescribeModelPackage", "ListModelPackages",
                                 "UpdateModelPackage"})
# Headers moto reads: the operation, and the region from the signature's credential scope.
_RELAYED_HEADERS = ("Content-Type", "X-Amz-Target", "Authorization", "X-Amz-Date")


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.timestamp()  # awsJson timestamps are epoch seconds
    raise TypeError(f"cannot serialise {type(value).__name__} in a SageMaker response")


class SageMakerService(Protocol):
    """What the endpoint serves: a TrainingJobService, or a TuningJobService in front of one."""

    def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]: ...

    def stop_all(self) -> None: ...


class LocalSageMaker:
    """The HTTP front of a SageMakerService; `url` is set once started."""

    def __init__(self, service: SageMakerService, registry_url: str | None = None) -> None:
        """`registry_url`: moto's server, which answers the Model Registry calls; without it they are refused."""
        self.service = service
        self._server = ThreadingHTTPServer((LOOPBACK, 0), _handler_for(service, registry_url))
        self._server.daemon_threads = True
        self.url = f"http://{LOOPBACK}:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="local-sagemaker", daemon=True)

    def start(self) -> "LocalSageMaker":
        self._thread.start()
        return self

    def stop(self) -> None:
        self.service.stop_all()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> "LocalSageMaker":
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def _handler_for(service: SageMakerService, registry_url: str | None) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (the http.server API)
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            target = self.headers.get("X-Amz-Target", "")
            try:
                if not target.startswith(TARGET_PREFIX):
                    raise ServiceError("UnknownOperationException",
                                       f"X-Amz-Target {target!r} does not start with {TARGET_PREFIX!r}")
                operation = target.removeprefix(TARGET_PREFIX)
                params = json.loads(body or b"{}")
                if not isinstance(params, dict):
                    raise ServiceError("SerializationException", "the request body must be a JSON object")
                if registry_url and operation in REGISTRY_OPERATIONS:
                    # moto checks few of the model's constraints; the service's front door checks them all.
                    validate_request(operation, params)
                    self._relay(registry_url, body)
                else:
                    self._reply(200, service.call(operation, params))
            except ServiceError as error:
                self._reply(error.http_status, error.body())
            except json.JSONDecodeError as error:
                self._reply(400, ServiceError("SerializationException", f"request body is not JSON: {error}").body())

        def _relay(self, url: str, body: bytes) -> None:
            headers = {name: self.headers[name] for name in _RELAYED_HEADERS if self.headers.get(name)}
            request = urllib.request.Request(url, data=body, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=30) as response:
                    status, data = response.status, response.read()
            except urllib.error.HTTPError as error:  # the service's error answers (4xx) pass through as they are
                status, data = error.code, error.read()
            self._send(status, data)

        def _reply(self, status: int, payload: dict[str, Any]) -> None:
            self._send(status, json.dumps(payload, default=_json_default).encode())

        def _send(self, status: int, data: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("x-amzn-RequestId", str(uuid.uuid4()))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the http.server API)
            """Quiet: request lines would drown the training logs."""

    return Handler
