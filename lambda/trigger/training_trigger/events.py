"""Every event the trigger accepts, parsed into one typed `TriggerRequest`.

- S3 "Object Created" through EventBridge, and classic S3 notification records, for a marker object that closes a
  dataset version (`<DATASET_PREFIX><name>/<version>/<marker>`); other keys are ignored.
- The scheduled EventBridge event: train on the newest complete dataset version, once per tick of the schedule.
- A manual payload (`aws lambda invoke`): a dataset or explicit channels, plus overrides.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote_plus

from aws_lambda_powertools.utilities.data_classes import EventBridgeEvent, S3Event, S3EventBridgeNotificationEvent

from training_trigger.errors import InvalidInput
from training_trigger.limits import data_location_errors, shown, tag_value_errors
from training_trigger.overrides import OVERRIDE_FIELDS, JobOverrides, parse_overrides
from training_trigger.settings import Settings
from training_trigger.tuning import TUNING_KEY, TuningSection, parse_tuning_section

CHANNEL_NAMES = ("train", "validation", "test")
MANUAL_FIELDS = ("dataset", "version", "channels", "job_name", "dry_run", TUNING_KEY, *OVERRIDE_FIELDS)
# The dataset name and version become path segments and, slugged, part of the job name.
_PATH_SEGMENT = re.compile(r"^(?!\.\.?$)[^/\x00-\x1f]+$")
S3_KEY_LIMIT_BYTES = 1024  # S3 stores no longer key, so no longer name can point at data
# s3://<bucket>/<prefix>: bucket names are 3-63 lowercase letters, digits, dots and hyphens.
_S3_URI = re.compile(r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?$")


@dataclass(frozen=True)
class TriggerRequest:
    """What an event asks for, before datasets are looked up and defaults applied."""

    source: str  # "s3-eventbridge" | "s3-notification" | "schedule" | "manual"
    dataset: str | None = None
    """Dataset folder name under the dataset prefix; give exactly one of `dataset` and `channels`."""
    version: str | None = None
    """Version folder of `dataset`; default: the newest complete version (the one whose marker was written last)."""
    marker_key: str | None = None
    marker_etag: str | None = None
    marker_version_id: str | None = None  # the marker object's version in the versioned data bucket
    scheduled_time: str | None = None  # the schedule tick's `time`: each tick trains, a redelivered tick does not
    channels: Mapping[str, str] = field(default_factory=dict)
    """Explicit S3 URIs by channel (`train`, `validation`, `test`), instead of a dataset; `train` is required."""
    overrides: JobOverrides = field(default_factory=JobOverrides)
    job_name: str | None = None
    """Training job name, starting with `<project_prefix>-`; default: a fresh
    `<prefix>-<dataset>-<UTC yyyymmddHHMMSS>-<6 hex>` for each manual run."""
    dry_run: bool = False
    """Build and check the request and return it without starting a job."""
    tuning: TuningSection | None = None
    """Start a hyperparameter tuning job whose trials are this job: the `tuning` section (docs/tuning.md), field
    by field over the manifest's `tuning`."""


@dataclass(frozen=True)
class Ignored:
    reason: str


def parse_event(event: Mapping[str, Any], settings: Settings) -> list[TriggerRequest] | Ignored:
    """The requests an event carries (one, except for a multi-record S3 notification), or why it is ignored.

    Raises InvalidInput for input that can never be valid: not an object, an S3 event missing what S3 always sends,
    or a bad manual payload.
    """
    if not isinstance(event, Mapping):
        raise InvalidInput([f"event={shown(event)} is a {type(event).__name__}, not a JSON object: send an S3 or "
                            f"EventBridge event, or a manual payload such as {{\"dataset\": \"<name>\"}}"])
    if "Records" in event:
        return _from_s3_notification(event, settings)
    if event.get("source") == "aws.s3" and event.get("detail-type") == "Object Created":
        _require_texts(event, [("detail", "bucket", "name"), ("detail", "object", "key"), ("detail", "object", "etag")])
        detail = S3EventBridgeNotificationEvent(event).detail
        request = _marker_request("s3-eventbridge", detail.bucket.name, detail.object.key, detail.object.etag,
                                  # S3 sends a version id only from a versioned bucket
                                  detail.object.get("version-id"), settings, key_field="detail.object.key")
        return [request] if isinstance(request, TriggerRequest) else request
    if event.get("source") == "aws.events" and event.get("detail-type") == "Scheduled Event":
        _require_texts(event, [("time",)])
        return [TriggerRequest(source="schedule", scheduled_time=EventBridgeEvent(event).time)]
    if "detail-type" in event:
        return Ignored(f"EventBridge event {event.get('source')}/{event.get('detail-type')} is not a trigger")
    return [_from_manual_payload(event, settings)]


def _from_s3_notification(event: Mapping[str, Any], settings: Settings) -> list[TriggerRequest] | Ignored:
    records = event["Records"]
    if not isinstance(records, list) or not records:
        raise InvalidInput([f"Records={shown(records)} is not a non-empty list of S3 records: send the notification "
                            f"S3 sends"])
    _require_texts(event, [("Records", index, name) for index in range(len(records))
                           for name in ("eventSource", "eventName")])
    requests, reasons = [], []
    for index, record in enumerate(S3Event(event).records):
        if record.get("eventSource") != "aws:s3" or not record.event_name.startswith("ObjectCreated:"):
            reasons.append(f"record {record.get('eventSource')}/{record.get('eventName')} is not an S3 object creation")
            continue
        # Only creations carry an ETag (the idempotency key); S3 always sends these three for them.
        _require_texts(event, [("Records", index, "s3", "bucket", "name"), ("Records", index, "s3", "object", "key"),
                               ("Records", index, "s3", "object", "eTag")])
        # The classic notification URL-encodes keys (a space arrives as '+'); Powertools leaves them encoded here.
        s3 = record.s3
        request = _marker_request("s3-notification", s3.bucket.name, unquote_plus(s3.get_object.key),
                                  s3.get_object.etag, s3.get_object.version_id, settings,
                                  key_field=f"Records[{index}].s3.object.key")
        if isinstance(request, Ignored):
            reasons.append(request.reason)
        else:
            requests.append(request)
    return requests or Ignored("; ".join(reasons) or "S3 notification without records")


def _require_texts(event: Mapping[str, Any], paths: list[tuple[str | int, ...]]) -> None:
    """Raises InvalidInput naming each path of the event that does not hold a non-empty string."""
    errors = []
    for path in paths:
        value: Any = event
        for part in path:
            if isinstance(part, int):
                value = value[part] if isinstance(value, list) and part < len(value) else None
            else:
                value = value.get(part) if isinstance(value, Mapping) else None
        if not (isinstance(value, str) and value):
            name = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in path).lstrip(".")
            errors.append(f"{name}={shown(value)} is not a non-empty string, which every S3 event carries: send "
                          f"the event S3 sends, or a manual payload")
    if errors:
        raise InvalidInput(errors)


def _marker_request(source: str, bucket: str, key: str, etag: str, version_id: str | None, settings: Settings, *,
                    key_field: str) -> TriggerRequest | Ignored:
    if len(key.encode()) > S3_KEY_LIMIT_BYTES:
        raise InvalidInput([f"{key_field}={shown(key)} is {len(key.encode())} bytes, over S3's "
                            f"{S3_KEY_LIMIT_BYTES}-byte key limit, so no stored object has it: send S3's own event"])
    if bucket != settings.data_bucket:
        return Ignored(f"s3://{bucket}/{key} is not in the data bucket {settings.data_bucket}")
    if not key.startswith(settings.dataset_prefix):
        return Ignored(f"s3://{bucket}/{key} is outside the dataset prefix {settings.dataset_prefix}")
    parts = key[len(settings.dataset_prefix):].split("/")
    if len(parts) != 3 or parts[2] not in settings.marker_names or not all(parts[:2]):
        return Ignored(f"s3://{bucket}/{key} is not a marker {list(settings.marker_names)} at "
                       f"{settings.dataset_prefix}<name>/<version>/")
    # The dataset, version and ETag become the job's provenance tags, which AWS's tagging rules bound.
    errors = [error for part, value in (("dataset", parts[0]), ("version", parts[1]), ("ETag", etag.strip('"')))
              for error in tag_value_errors(value, f"{key_field} ({part}, tagged on the job)")]
    if errors:
        raise InvalidInput(errors)
    return TriggerRequest(source=source, dataset=parts[0], version=parts[1], marker_key=key,
                          marker_etag=etag.strip('"'), marker_version_id=version_id)


def _from_manual_payload(payload: Mapping[str, Any], settings: Settings) -> TriggerRequest:
    errors = [f"{name} is not a payload field: use one of {list(MANUAL_FIELDS)}"
              for name in payload if name not in MANUAL_FIELDS]
    dataset, version, channels = payload.get("dataset"), payload.get("version"), payload.get("channels", {})
    for name, value in (("dataset", dataset), ("version", version)):
        if value is not None and not (isinstance(value, str) and _PATH_SEGMENT.match(value)):
            errors.append(f"{name}={shown(value)} is not a dataset path segment: give the folder name under the "
                          f"dataset prefix, without '/'")
        elif isinstance(value, str) and len(value.encode()) > S3_KEY_LIMIT_BYTES:
            errors.append(f"{name}={shown(value)} is {len(value.encode())} bytes, over S3's {S3_KEY_LIMIT_BYTES}-byte "
                          f"key limit, so no dataset can live there: give the folder name under the dataset prefix")
        elif isinstance(value, str):
            errors += tag_value_errors(value, f"{name} (tagged on the job)")
    if not isinstance(channels, Mapping):
        errors.append(f"channels={channels!r} is not an object: e.g. {{\"train\": \"s3://bucket/prefix/\"}}")
        channels = {}
    for name, uri in channels.items():
        if name not in CHANNEL_NAMES:
            errors.append(f"channels.{name} is not a channel the scripts read: use {list(CHANNEL_NAMES)}")
        if not (isinstance(uri, str) and _S3_URI.match(uri)):
            errors.append(f"channels.{name}={shown(uri)} is not an S3 URI: use s3://bucket/prefix/ (a bucket name is "
                          f"3-63 lowercase letters, digits, dots and hyphens)")
        else:
            errors += data_location_errors(uri, f"channels.{name}", data_bucket=settings.data_bucket,
                                           dataset_prefix=settings.dataset_prefix,
                                           extra_buckets=settings.extra_data_buckets)
    if bool(dataset) == bool(channels):
        errors.append("give exactly one of dataset (train on a dataset version) or channels (explicit S3 URIs)")
    if version is not None and not dataset:
        errors.append(f"version={version!r} needs dataset: add the dataset name the version belongs to")
    job_name, dry_run = payload.get("job_name"), payload.get("dry_run", False)
    if job_name is not None and not isinstance(job_name, str):
        errors.append(f"job_name={job_name!r} is not a string: give a name starting with the project prefix")
    if not isinstance(dry_run, bool):
        errors.append(f"dry_run={dry_run!r} is not true or false: use a JSON boolean")
    try:
        overrides = parse_overrides(payload, where="payload", settings=settings)
    except InvalidInput as invalid:
        errors += invalid.errors
    tuning = None
    if TUNING_KEY in payload:
        try:
            tuning = parse_tuning_section(payload[TUNING_KEY], f"payload.{TUNING_KEY}")
        except InvalidInput as invalid:
            errors += invalid.errors
    if errors:
        raise InvalidInput(errors)
    return TriggerRequest(source="manual", dataset=dataset, version=version, channels=dict(channels),
                          overrides=overrides, job_name=job_name, dry_run=dry_run, tuning=tuning)
