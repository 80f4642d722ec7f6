"""Errors in the shape the SageMaker API returns them (awsJson1.1: HTTP 400, `__type` and `Message`)."""

from __future__ import annotations


class ServiceError(Exception):
    """An API error botocore turns into `ClientError` with `Error.Code == code`."""

    def __init__(self, code: str, message: str, http_status: int = 400) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.http_status = http_status

    def body(self) -> dict[str, str]:
        return {"__type": self.code, "Message": self.message}


def validation_error(message: str) -> ServiceError:
    return ServiceError("ValidationException", message)
