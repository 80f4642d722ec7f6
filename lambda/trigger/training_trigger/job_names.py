"""Training job names: deterministic for dataset events and schedule ticks (from their job key), fresh for manual
runs."""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import uuid

MAX_LENGTH = 63
JOB_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
_HASH_LENGTH = 10


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-")


def _compose(prefix: str, readable: str, unique: str) -> str:
    """`<prefix>-<readable>-<unique>`, cutting only the readable middle so prefix and unique part always fit."""
    room = MAX_LENGTH - len(prefix) - len(unique) - 2
    middle = _slug(readable)[: max(room, 0)].strip("-")
    return "-".join(part for part in (prefix, middle, unique) if part)


def dataset_job_name(prefix: str, dataset: str, version: str, job_key: str) -> str:
    """`<prefix>-<dataset>-<version>-<hash of job_key>`: the same key always gives the same name, so a second
    CreateTrainingJob for it fails with ResourceInUse instead of training twice (planning.job_key says what it holds).
    """
    digest = hashlib.sha256(job_key.encode()).hexdigest()[:_HASH_LENGTH]
    return _compose(prefix, f"{dataset}-{version}", digest)


def manual_job_name(prefix: str, dataset: str | None, now: dt.datetime | None = None) -> str:
    """A fresh name for each manual run: a second-resolution timestamp plus random hex."""
    stamp = (now or dt.datetime.now(dt.timezone.utc)).strftime("%Y%m%d%H%M%S")
    return _compose(prefix, dataset or "manual", f"{stamp}-{uuid.uuid4().hex[:6]}")


def job_name_errors(name: str, prefix: str) -> list[str]:
    errors = []
    if not name.startswith(prefix + "-"):
        errors.append(f"job_name={name!r} does not start with {prefix + '-'!r}: the trigger's permissions cover "
                      f"only training-job/{prefix}-*; rename it to {prefix}-<something>")
    if len(name) > MAX_LENGTH or not JOB_NAME_PATTERN.match(name):
        errors.append(f"job_name={name!r} is not a valid training job name: at most {MAX_LENGTH} letters, digits "
                      f"and hyphens, starting and ending with a letter or digit")
    return errors
