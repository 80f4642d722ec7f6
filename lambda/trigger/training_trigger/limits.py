"""AWS's documented limits on what the trigger sends, checked before any call: tags, S3 locations, instance types,
hyperparameter names, and the lengths, patterns, enums and ranges of the CreateTrainingJob API model.

botocore's client-side validation checks types, required members and minimum lengths only; SageMaker checks the
rest after the trigger has done its work, and answers with a ValidationException that names no payload field.
Each function here returns one-line errors naming the field, the bad value and the fix (an empty list: fine).
"""

from __future__ import annotations

import difflib
import functools
import re
import unicodedata
from collections.abc import Collection, Mapping
from typing import Any

from training_trigger import container_profiles
from training_trigger.aws_clients import sagemaker_client
from training_trigger.job_environment import EnvironmentLimits, create_training_job_limits

# Tagging rules (AWS General Reference, "Tag naming limits and requirements"; CreateTrainingJob `Tags`).
MAX_TAGS = 50
MAX_TAG_KEY_LENGTH = 128
MAX_TAG_VALUE_LENGTH = 256
RESERVED_TAG_PREFIX = "aws:"
# `^([\p{L}\p{Z}\p{N}_.:/=+\-@]*)$`: letters, separators (spaces), numbers and these symbols.
TAG_SYMBOLS = "_.:/=+-@"
TAG_CHARACTERS_HINT = f"letters, digits, spaces and {TAG_SYMBOLS}"
# CreateTrainingJob `HyperParameters`.
MAX_HYPERPARAMETERS = 100
MAX_HYPERPARAMETER_KEY_LENGTH = 256
MAX_HYPERPARAMETER_VALUE_LENGTH = 2500
# The API's patterns are Java regular expressions matched against the whole value; Java's `.` stops at these.
JAVA_LINE_TERMINATORS = "\n\r\u0085\u2028\u2029"
# CreateTrainingJob `InputDataConfig`.
MAX_CHANNELS = 20
MAX_CHANNEL_NAME_LENGTH = 64
CHANNEL_NAME_PATTERN = re.compile(r"^[A-Za-z0-9.\-_]+$")
# S3 (`S3Uri` is at most 1024 characters).
MAX_S3_URI_LENGTH = 1024
# S3's "safe" key characters and those it lists as needing special handling but working in every SDK; the rest
# (`\ { } ^ % ` [ ] " < > ~ # |`, control characters) S3's own guide says to avoid, and none is ever meant.
S3_KEY_SYMBOLS = " !-_.*'()&$@=;:+,"
S3_KEY_CHARACTERS_HINT = f"letters, digits and {S3_KEY_SYMBOLS.strip()!r} (and spaces)"
_SHOWN_CHARACTERS = 60


def shown(value: Any) -> str:
    """`value` as errors repeat it: its repr, cut to a readable length."""
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARACTERS else f"{text[:_SHOWN_CHARACTERS]}...({len(text)} characters)"


def member(where: str, key: str) -> str:
    """`where.key` for a one-line error: unprintable characters escaped, a long key cut (its length is reported on
    its own)."""
    name = key if key.isprintable() else repr(key)[1:-1]
    return f"{where}.{name if len(name) <= 40 else name[:40] + '...'}"


def _tag_text_errors(text: str, where: str, role: str, limit: int) -> list[str]:
    errors = []
    if text[:len(RESERVED_TAG_PREFIX)].lower() == RESERVED_TAG_PREFIX:
        errors.append(f"{where}: the tag {role} {shown(text)} starts with {RESERVED_TAG_PREFIX!r}, which AWS reserves "
                      f"for itself (in any case): choose another {role}")
    if len(text) > limit:
        errors.append(f"{where}: the tag {role} is {len(text)} characters, over AWS's {limit}: shorten it")
    bad = sorted({char for char in text if not is_tag_character(char)})
    if bad:
        errors.append(f"{where}: the tag {role} {shown(text)} holds {bad}, which AWS tags do not allow: use only "
                      f"{TAG_CHARACTERS_HINT}")
    return errors


def is_tag_character(char: str) -> bool:
    return unicodedata.category(char)[0] in "LZN" or char in TAG_SYMBOLS


def tag_errors(tags: Mapping[str, str], where: str, *, reserved_keys: Collection[str] = (),
               others: int = 0) -> list[str]:
    """AWS's tagging rules for `tags`, of which `where` is the field; `others` tags join them, keyed
    `reserved_keys` (the trigger's own), so neither may repeat a key nor push the count over AWS's limit."""
    errors = []
    for key, value in tags.items():
        if key in reserved_keys:
            errors.append(f"{where}.{key} is a tag the trigger sets itself ({sorted(reserved_keys)}): rename it")
            continue
        if not key:
            errors.append(f"{where}: a tag key is empty: AWS needs 1 to {MAX_TAG_KEY_LENGTH} characters")
        errors += _tag_text_errors(key, member(where, key), "key", MAX_TAG_KEY_LENGTH)
        errors += _tag_text_errors(value, member(where, key), "value", MAX_TAG_VALUE_LENGTH)
    if len(tags) + others > MAX_TAGS:
        counted = f"{len(tags)} tags" + (f" plus the trigger's own {others}" if others else "")
        errors.append(f"{where}: {counted} exceed AWS's {MAX_TAGS} per resource: drop {len(tags) + others - MAX_TAGS}")
    return errors


def tag_value_errors(value: str, where: str) -> list[str]:
    """Errors for text the trigger itself turns into a tag value (a dataset name, a version, an ETag)."""
    return _tag_text_errors(value, where, "value", MAX_TAG_VALUE_LENGTH)


def hyperparameter_key_errors(key: str, where: str) -> list[str]:
    """The API's `.*` key pattern (Java: no line breaks) and its length; values are JSON-encoded, which escapes
    line breaks, so only their encoded length can break a rule (checked on the built request)."""
    if not key:
        return [f"{where}: a hyperparameter name is empty: the scripts read each one as --<name>; name it"]
    errors = []
    if any(char in JAVA_LINE_TERMINATORS for char in key):
        errors.append(f"{member(where, key)}: the name holds a line break, which SageMaker refuses: remove it")
    if len(key) > MAX_HYPERPARAMETER_KEY_LENGTH:
        errors.append(f"{member(where, key)}: the name is {len(key)} characters, over SageMaker's "
                      f"{MAX_HYPERPARAMETER_KEY_LENGTH}: shorten it")
    return errors


@functools.cache
def known_instance_types() -> tuple[str, ...]:
    """The training instance types of the SageMaker API model that this runtime's botocore carries."""
    return tuple(sagemaker_client().meta.service_model.shape_for("TrainingInstanceType").enum)


@functools.cache
def s3_data_distributions() -> tuple[str, ...]:
    """How an S3 channel's objects may be spread over the instances (`FullyReplicated`, `ShardedByS3Key`)."""
    return tuple(sagemaker_client().meta.service_model.shape_for("S3DataDistribution").enum)


@functools.cache
def api_shape(name: str) -> Any:
    """A shape of the SageMaker API model this runtime's botocore carries, e.g. `HyperParameterTuningJobName`."""
    return sagemaker_client().meta.service_model.shape_for(name)


@functools.cache
def training_environment_limits() -> EnvironmentLimits:
    """CreateTrainingJob's limits on a job's `Environment`, from the API model this runtime's botocore carries."""
    return create_training_job_limits(sagemaker_client().meta.service_model)


def instance_type_errors(instance_type: Any, where: str) -> list[str]:
    """The rule synthesis applies to the stack's `instance_type` (container_profiles.py), against this runtime's
    botocore."""
    return container_profiles.instance_type_errors(instance_type, where, known_instance_types())


def channel_name_errors(names: Collection[str], where: str) -> list[str]:
    """Folders under a dataset version become SageMaker input channels, named by CreateTrainingJob's rules."""
    errors = [f"{where}: {name!r} is not a SageMaker channel name: rename the folder to at most "
              f"{MAX_CHANNEL_NAME_LENGTH} letters, digits, '.', '-' and '_'"
              for name in names if len(name) > MAX_CHANNEL_NAME_LENGTH or not CHANNEL_NAME_PATTERN.match(name)]
    if len(names) > MAX_CHANNELS:
        errors.append(f"{where}: {len(names)} folders exceed SageMaker's {MAX_CHANNELS} input channels: keep "
                      f"train, validation and test")
    return errors


def ceiling_errors(value: Any, where: str, *, ceiling: int, setting: str) -> list[str]:
    """A requested amount above the pipeline's configured cost ceiling `setting`."""
    if isinstance(value, int) and not isinstance(value, bool) and value > ceiling:
        return [f"{where}={value} exceeds the pipeline's ceiling {setting}={ceiling}: ask for at most {ceiling}, or "
                f"raise {setting} in the pipeline configuration and redeploy"]
    return []


def _split_s3_uri(uri: str) -> tuple[str, str]:
    """(bucket, key) of `s3://bucket/key`."""
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return bucket, key


def _s3_key_errors(uri: str, key: str, where: str) -> list[str]:
    """A normalised key: no empty, '.' or '..' segment (a trailing '/' ends a prefix), only sensible characters."""
    errors = []
    segments = key.removesuffix("/").split("/")
    if any(segment in ("", ".", "..") for segment in segments):
        errors.append(f"{where}={shown(uri)} has an empty, '.' or '..' path segment (or '//'): write the key as "
                      f"S3 stores it, e.g. 'datasets/<name>/<version>/train/'")
    bad = sorted({char for char in key if not (char.isalnum() or char in S3_KEY_SYMBOLS or char == "/")})
    if bad:
        errors.append(f"{where}={shown(uri)} holds {bad}, which S3 advises against and no dataset uses: rename the "
                      f"folder with {S3_KEY_CHARACTERS_HINT}")
    return errors


def data_location_errors(uri: str, where: str, *, data_bucket: str, dataset_prefix: str,
                         extra_buckets: Collection[str]) -> list[str]:
    """A channel must lie where the training role may read: the data bucket's dataset prefix, or an extra bucket."""
    if len(uri) > MAX_S3_URI_LENGTH:
        return [f"{where}={shown(uri)} is {len(uri)} characters, over SageMaker's {MAX_S3_URI_LENGTH}: shorten it"]
    bucket, key = _split_s3_uri(uri)
    if bucket == data_bucket:
        if not key.startswith(dataset_prefix):
            return [f"{where}={shown(uri)} lies outside {dataset_prefix!r}, the only part of the data bucket training "
                    f"jobs may read: move the data under s3://{data_bucket}/{dataset_prefix}"]
    elif bucket not in extra_buckets:
        allowed = [data_bucket, *extra_buckets]
        return [f"{where}={shown(uri)} is in bucket {bucket!r}, which training jobs may not read: use one of "
                f"{allowed}, or add the bucket to extra_data_buckets in the pipeline configuration"]
    return _s3_key_errors(uri, key, where) if key else []


def service_limit_errors(request: Mapping[str, Any], *, skip: Collection[str] = (),
                         operation: str = "CreateTrainingJob") -> list[str]:
    """Each value of a request for `operation` against the API model's maximum lengths and counts, patterns,
    enum values and numeric ranges: the rules botocore leaves to the service. Top-level members in `skip` are left
    out (their own checks name the user's field)."""
    shape = sagemaker_client().meta.service_model.operation_model(operation).input_shape
    errors: list[str] = []
    for name, value in request.items():
        if name not in skip and name in shape.members:
            _walk(shape.members[name], value, name, errors)
    return errors


def _walk(shape: Any, value: Any, path: str, errors: list[str]) -> None:
    metadata = shape.metadata
    if shape.type_name == "structure" and isinstance(value, Mapping):
        for name, item in value.items():
            if name in shape.members:
                _walk(shape.members[name], item, f"{path}.{name}", errors)
    elif shape.type_name in ("list", "map") and isinstance(value, (list, Mapping)):
        if "max" in metadata and len(value) > metadata["max"]:
            errors.append(f"{path}: {len(value)} entries exceed SageMaker's {metadata['max']}: drop some")
        items = value.items() if isinstance(value, Mapping) else enumerate(value)
        for key, item in items:
            if shape.type_name == "map":
                _walk(shape.key, key, f"{path} key {key!r}", errors)
                _walk(shape.value, item, f"{path}.{key}", errors)
            else:
                _walk(shape.member, item, f"{path}[{key}]", errors)
    elif shape.type_name == "string" and isinstance(value, str):
        _string_errors(value, metadata, path, errors)
    elif shape.type_name in ("integer", "long") and isinstance(value, int):
        if "max" in metadata and value > metadata["max"]:
            errors.append(f"{path}={value} exceeds SageMaker's maximum {metadata['max']}: lower it")


def _string_errors(value: str, metadata: Mapping[str, Any], path: str, errors: list[str]) -> None:
    if metadata.get("enum") and value not in metadata["enum"]:
        close = difflib.get_close_matches(value, metadata["enum"], n=3)
        errors.append(f"{path}={shown(value)} is not a value SageMaker accepts: use one of "
                      f"{close or list(metadata['enum'])[:10]}")
    if "max" in metadata and len(value) > metadata["max"]:
        errors.append(f"{path}={shown(value)} is {len(value)} characters, over SageMaker's {metadata['max']}: "
                      f"shorten it")
    pattern = _python_pattern(metadata.get("pattern", ""))
    if pattern is not None and not pattern.fullmatch(value):
        errors.append(f"{path}={shown(value)} does not match SageMaker's pattern {metadata['pattern']!r}: fix the "
                      f"setting it comes from")


@functools.cache
def _python_pattern(java_pattern: str) -> re.Pattern[str] | None:
    """The API's Java pattern in Python, with Java's `.` (no line terminators); None for patterns Python cannot
    read (Unicode classes such as `\\p{L}`, checked by hand above) and for no pattern."""
    if not java_pattern or "\\p{" in java_pattern:
        return None
    translated, escaped, in_class = [], False, False
    for char in java_pattern:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == "[":
            in_class = True
        elif char == "]":
            in_class = False
        elif char == "." and not in_class:
            translated.append(f"[^{JAVA_LINE_TERMINATORS}]")
            continue
        translated.append(char)
    try:
        return re.compile("".join(translated))
    except re.error:
        return None
