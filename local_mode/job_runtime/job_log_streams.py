"""Each local host's output as a CloudWatch Logs stream on moto's server, named and grouped as SageMaker names them:
log group /aws/sagemaker/TrainingJobs, stream `<job name>/algo-<n>-<epoch seconds>`.

Lines are sent in batches every `flush_seconds`, as a container's log agent sends them, so a stream lags its host's
output by about that long. A host's stream appears with its first line, and blank lines are not sent (CloudWatch
refuses empty events).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from botocore.exceptions import ClientError

from stacks.function_names import TRAINING_LOG_GROUP

FLUSH_SECONDS = 1.0
EVENTS_PER_CALL = 10_000  # PutLogEvents' largest batch


def _now_ms() -> int:
    return int(time.time() * 1000)


class HostLogStreams:
    """Collects lines per host; `close()` sends what is left and stops the sender."""

    def __init__(self, logs: Any, job_name: str, flush_seconds: float = FLUSH_SECONDS) -> None:
        self._logs = logs
        self._job_name = job_name
        self._started = int(time.time())
        self._pending: dict[str, list[dict[str, Any]]] = {}
        self._created: set[str] = set()
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._ensure_group()
        self._sender = threading.Thread(target=self._send_every, args=(flush_seconds,), name=f"logs-{job_name}",
                                        daemon=True)
        self._sender.start()

    def stream_name(self, host: str) -> str:
        """The epoch suffix is the moment the hosts started, as in SageMaker's stream names."""
        return f"{self._job_name}/{host}-{self._started}"

    def put(self, host: str, line: str) -> None:
        if line.strip():
            with self._lock:
                self._pending.setdefault(host, []).append({"timestamp": _now_ms(), "message": line})

    def close(self) -> None:
        self._closed.set()
        self._sender.join()
        self._flush()

    def _ensure_group(self) -> None:
        try:
            self._logs.create_log_group(logGroupName=TRAINING_LOG_GROUP)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ResourceAlreadyExistsException":
                raise

    def _send_every(self, seconds: float) -> None:
        while not self._closed.wait(seconds):
            self._flush()

    def _flush(self) -> None:
        with self._lock:
            batches, self._pending = self._pending, {}
        for host, events in batches.items():
            stream = self.stream_name(host)
            if stream not in self._created:
                self._logs.create_log_stream(logGroupName=TRAINING_LOG_GROUP, logStreamName=stream)
                self._created.add(stream)
            for start in range(0, len(events), EVENTS_PER_CALL):
                self._logs.put_log_events(logGroupName=TRAINING_LOG_GROUP, logStreamName=stream,
                                          logEvents=events[start:start + EVENTS_PER_CALL])
