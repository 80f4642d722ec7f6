"""The failure reason SageMaker shows for a failed job: the script's own one-line message, written to
`/opt/ml/output/failure` before it exits non-zero.

SageMaker reports that file's content as the job's FailureReason; the training toolkit writes its own generic text
there only when the file does not exist yet. Without it a user reading DescribeTrainingJob gets the tail of a
traceback instead of `ValueError: .../rank.train:5: NaN or infinite value; fix or drop that row`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path


def failure_file(env: Mapping[str, str] = os.environ) -> Path | None:
    """`$SM_OUTPUT_DIR/failure` as the toolkit sets it, else `$SAGEMAKER_BASE_DIR/output/failure` (local mode
    relocates /opt/ml this way); None outside SageMaker, where stderr is the only report."""
    if env.get("SM_OUTPUT_DIR"):
        return Path(env["SM_OUTPUT_DIR"]) / "failure"
    if env.get("SAGEMAKER_BASE_DIR"):
        return Path(env["SAGEMAKER_BASE_DIR"]) / "output" / "failure"
    return None


def write_failure(path: Path, message: str) -> None:
    """The first writer wins, as in the toolkit: when one rank fails, the others fail after it with collateral
    errors (a peer closed the connection) that must not replace the cause."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(message)


@contextmanager
def failure_reported(env: Mapping[str, str] = os.environ) -> Iterator[None]:
    """Writes any exception escaping the block as `Type: message` to the failure file, then lets it propagate
    (the traceback still goes to the log and the exit code stays non-zero)."""
    try:
        yield
    except Exception as error:
        path = failure_file(env)
        if path is not None:
            write_failure(path, f"{type(error).__name__}: {error}")
        raise
