"""The failure reason SageMaker shows for a failed job: the script's own one-line message, written to
`/opt/ml/output/failure` before it exits non-zero.

SageMaker reports that file's content as the job's FailureReason; the training toolkit writes its own generic text
there only when the file does not exist yet. Without it a user reading DescribeTrainingJob gets the tail of a
traceback instead of `DataError: .../rank.train:5: NaN or infinite value; fix or drop that row`. A collective that
timed out is reported with the host and rank that gave up and the ranks that never arrived
(sagemaker_distributed.collective_timeout).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from sagemaker_distributed.collective_timeout import is_collective_timeout, timeout_report
from sagemaker_distributed.paths import failure_file

USAGE_ERROR_EXIT_CODE = 2  # what argparse exits with for a bad flag


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


def failure_reason(error: Exception, env: Mapping[str, str] = os.environ) -> str:
    """`Type: message`, or for a collective that timed out, where and what it waited for."""
    if is_collective_timeout(error):
        return timeout_report(error, env)
    return f"{type(error).__name__}: {error}"


@contextmanager
def failure_reported(env: Mapping[str, str] = os.environ,
                     usage_errors: tuple[type[Exception], ...] = ()) -> Iterator[None]:
    """Writes any exception escaping the block as `Type: message` to the failure file, then lets it propagate
    (the traceback still goes to the log and the exit code stays non-zero). `usage_errors` are the user's to fix,
    not the code's: they print that one line alone and exit with status 2, without a traceback."""
    try:
        yield
    except Exception as error:
        path = failure_file(env)
        if path is not None:
            write_failure(path, failure_reason(error, env))
        if isinstance(error, usage_errors):
            print(f"error: {error}", file=sys.stderr, flush=True)
            raise SystemExit(USAGE_ERROR_EXIT_CODE) from None
        raise
