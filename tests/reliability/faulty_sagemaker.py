"""A local SageMaker service that answers one operation with a service error until told to heal, counting calls.

It wraps the local-mode TrainingJobService and is served by the same LocalSageMaker HTTP front, so the trigger's
real botocore client sees real HTTP 400 `{"__type": "ThrottlingException", ...}` answers, as from SageMaker.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

from local_mode.sagemaker_api.service_errors import ServiceError
from local_mode.sagemaker_api.training_job_service import TrainingJobService

ERROR_MESSAGES = {
    "ThrottlingException": "Rate exceeded",
    "ResourceLimitExceeded": "The account-level service limit 'ml.m5.xlarge for training job usage' is 1 Instances, "
                             "with current utilization of 1 Instances and a request delta of 1 Instances.",
}


class FaultySageMaker:
    def __init__(self, service: TrainingJobService, *, operation: str, error_code: str,
                 failures: int | None = None) -> None:
        """`failures`: how many calls of `operation` fail before it works; None: every call, until `heal()`."""
        self.service, self.operation, self.error_code = service, operation, error_code
        self._failures_left = failures
        self.requests: Counter[str] = Counter()
        self._lock = threading.Lock()

    def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.requests[operation] += 1
            fail = operation == self.operation and self._failures_left != 0
            if fail and self._failures_left is not None:
                self._failures_left -= 1
        if fail:
            raise ServiceError(self.error_code, ERROR_MESSAGES[self.error_code])
        return self.service.call(operation, params)

    def heal(self) -> None:
        with self._lock:
            self._failures_left = 0

    def stop_all(self) -> None:
        self.service.stop_all()
