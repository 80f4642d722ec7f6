"""Training and tuning job names: deterministic for dataset events and schedule ticks (from their job key), fresh for
manual runs.

Standard library only: synthesis loads this file alone (stacks/trigger_modules.py) to refuse a project prefix too
long for the tuning job names built here (`longest_tuning_prefix`).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import uuid

MAX_LENGTH = 63
JOB_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
# CreateHyperParameterTuningJob's name is at most 32 characters (botocore's model; preflight checks it there too):
# SageMaker names each trial `<tuning job>-<3 digits>-<8 hex>`, which must fit a training job's 63.
MAX_TUNING_LENGTH = 32
# The part of a name only that job has: the job key's hash for dataset events, random hex for a manual tuning job.
_HASH_LENGTH = 10


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-")


def _compose(prefix: str, readable: str, unique: str, max_length: int = MAX_LENGTH) -> str:
    """`<prefix>-<readable>-<unique>`, cutting only the readable middle so prefix and unique part always fit."""
    room = max_length - len(prefix) - len(unique) - 2
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


def job_name_errors(name: str, prefix: str, *, tuning: bool = False) -> list[str]:
    """A training job's name, or with `tuning` a tuning job's (at most 32 characters)."""
    kind, limit = ("hyper-parameter-tuning-job", MAX_TUNING_LENGTH) if tuning else ("training-job", MAX_LENGTH)
    errors = []
    if not name.startswith(prefix + "-"):
        errors.append(f"job_name={name!r} does not start with {prefix + '-'!r}: the trigger's permissions cover "
                      f"only {kind}/{prefix}-*; rename it to {prefix}-<something>")
    if len(name) > limit or not JOB_NAME_PATTERN.match(name):
        errors.append(f"job_name={name!r} is not a valid {kind.replace('-', ' ')} name: at most {limit} letters, "
                      f"digits and hyphens, starting and ending with a letter or digit")
    return errors


def longest_tuning_prefix() -> int:
    """The longest project prefix with which every tuning job name fits: `<prefix>-<unique part>`, the dataset cut
    to nothing."""
    return MAX_TUNING_LENGTH - len("-") - _HASH_LENGTH


def dataset_tuning_job_name(prefix: str, dataset: str, job_key: str) -> str:
    """`<prefix>-<dataset, cut>-<hash of job_key>`, at most 32 characters: the same key gives the same name (see
    dataset_job_name)."""
    digest = hashlib.sha256(job_key.encode()).hexdigest()[:_HASH_LENGTH]
    return _compose(prefix, dataset, digest, MAX_TUNING_LENGTH)


def manual_tuning_job_name(prefix: str, dataset: str | None) -> str:
    """A fresh `<prefix>-<dataset, cut>-<10 random hex>` for each manual run (SageMaker records when it started)."""
    return _compose(prefix, dataset or "manual", uuid.uuid4().hex[:_HASH_LENGTH], MAX_TUNING_LENGTH)
