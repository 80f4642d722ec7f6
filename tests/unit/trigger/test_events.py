"""Every accepted event shape becomes one TriggerRequest; everything else is ignored or rejected with reasons."""

from __future__ import annotations

import copy

import pytest
from training_trigger.errors import InvalidInput
from training_trigger.events import Ignored, TriggerRequest, parse_event

from trigger.sample_inputs import load_event


@pytest.mark.parametrize(
    ("sample", "source", "etag"),
    [
        ("s3_eventbridge_object_created.json", "s3-eventbridge", "d41d8cd98f00b204e9800998ecf8427e"),
        ("s3_notification_put.json", "s3-notification", "7b4ef1a3d1e26c2b5e0f3e9d7c1a8b42"),
    ],
)
def test_marker_events_name_the_dataset_version_with_decoded_keys(settings, sample, source, etag):
    # Given a stored S3 event for a marker whose key is URL-encoded ("web+search" is "web search")
    event = load_event(sample)
    # When it is parsed
    [request] = parse_event(event, settings)
    # Then the dataset, version, marker and its ETag come out decoded
    assert request.source == source
    assert (request.dataset, request.version) == ("web search", "2026-11-01")
    assert request.marker_key.startswith("datasets/web search/2026-11-01/")
    assert request.marker_etag == etag


def test_literal_plus_encoded_as_percent_2b_survives_decoding(settings):
    event = load_event("s3_eventbridge_object_created.json")
    event["detail"]["object"]["key"] = "datasets/c%2B%2B-docs/v3/_SUCCESS"
    [request] = parse_event(event, settings)
    assert request.dataset == "c++-docs"


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        ("datasets/web+search/2026-11-01/train/part-0000.txt", "is not a marker"),
        ("datasets/web+search/_SUCCESS", "is not a marker"),
        ("exports/web+search/2026-11-01/_SUCCESS", "outside the dataset prefix"),
        ("datasets/web+search/2026-11-01/_DONE", "is not a marker"),
    ],
)
def test_objects_that_do_not_close_a_version_are_ignored(settings, key, reason):
    # Given an object-created event for an object that is not a version's marker
    event = load_event("s3_eventbridge_object_created.json")
    event["detail"]["object"]["key"] = key
    # When it is parsed
    parsed = parse_event(event, settings)
    # Then it is ignored, with the reason
    assert isinstance(parsed, Ignored) and reason in parsed.reason


def test_events_from_another_bucket_are_ignored(settings):
    event = load_event("s3_notification_put.json")
    event["Records"][0]["s3"]["bucket"]["name"] = "someone-elses-bucket"
    parsed = parse_event(event, settings)
    assert isinstance(parsed, Ignored) and "not in the data bucket" in parsed.reason


def test_every_marker_record_of_a_notification_is_a_request(settings):
    # Given a notification with two marker records and one data object
    event = load_event("s3_notification_put.json")
    second, data = copy.deepcopy(event["Records"][0]), copy.deepcopy(event["Records"][0])
    second["s3"]["object"]["key"] = "datasets/news/2026-11-02/_SUCCESS"
    data["s3"]["object"]["key"] = "datasets/news/2026-11-02/train/part-0.txt"
    event["Records"] += [second, data]
    # When it is parsed
    requests = parse_event(event, settings)
    # Then both markers become requests and the data object is dropped
    assert [(r.dataset, r.version) for r in requests] == [("web search", "2026-11-01"), ("news", "2026-11-02")]


def test_deletions_are_ignored(settings):
    event = load_event("s3_notification_put.json")
    event["Records"][0]["eventName"] = "ObjectRemoved:Delete"
    assert isinstance(parse_event(event, settings), Ignored)


def test_schedule_asks_for_the_newest_complete_version_once_per_tick(settings):
    # Given a tick of the retrain schedule / When it is parsed
    [request] = parse_event(load_event("schedule.json"), settings)
    # Then it names no dataset (the newest complete version) and carries the tick's time, its idempotency key
    assert request == TriggerRequest(source="schedule", scheduled_time="2026-11-02T03:00:00Z")


def test_a_schedule_event_without_its_time_is_rejected_naming_the_field(settings):
    event = load_event("schedule.json")
    del event["time"]
    with pytest.raises(InvalidInput) as invalid:
        parse_event(event, settings)
    assert invalid.value.errors[0].startswith("time=None is not a non-empty string")


def test_marker_events_carry_the_marker_objects_version(settings):
    # Given the EventBridge event from the versioned data bucket, and both event shapes from an unversioned one
    [versioned] = parse_event(load_event("s3_eventbridge_object_created.json"), settings)
    unversioned_eventbridge = load_event("s3_eventbridge_object_created.json")
    del unversioned_eventbridge["detail"]["object"]["version-id"]
    unversioned = [parse_event(unversioned_eventbridge, settings)[0],
                   parse_event(load_event("s3_notification_put.json"), settings)[0]]
    # Then the version id S3 sent is kept as the marker's identity, and its absence stays visible
    assert versioned.marker_version_id == "IYV3p45BT0ac8hjHg1houSdS1a.Mro8e"
    assert [request.marker_version_id for request in unversioned] == [None, None]


def test_other_eventbridge_events_are_ignored(settings):
    event = {**load_event("schedule.json"), "source": "aws.sagemaker",
             "detail-type": "SageMaker Training Job State Change"}
    assert isinstance(parse_event(event, settings), Ignored)


def test_manual_payload_carries_its_overrides(settings):
    # Given the documented manual dataset payload
    payload = load_event("manual_dataset.json")
    # When it is parsed
    [request] = parse_event(payload, settings)
    # Then every field arrives typed
    assert (request.source, request.dataset, request.version, request.dry_run) == (
        "manual", payload["dataset"], payload["version"], True)
    assert request.overrides.distribution == payload["distribution"]
    assert request.overrides.instance_count == payload["instance_count"]
    assert dict(request.overrides.hyperparameters) == payload["hyperparameters"]
    assert dict(request.overrides.tags) == payload["tags"]


def test_manual_channels_payload(settings):
    payload = load_event("manual_channels.json")
    [request] = parse_event(payload, settings)
    assert dict(request.channels) == payload["channels"]
    assert request.job_name == payload["job_name"] and request.dataset is None


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"dataset": "news", "instance_typ": "ml.p4d.24xlarge"}, "instance_typ is not a payload field"),
        ({}, "give exactly one of dataset"),
        ({"dataset": "news", "channels": {"train": "s3://b/t/"}}, "give exactly one of dataset"),
        ({"version": "v1", "channels": {"train": "s3://b/t/"}}, "version='v1' needs dataset"),
        ({"channels": {"train": "/local/path"}}, "channels.train='/local/path' is not an S3 URI"),
        ({"channels": {"eval": "s3://b/e/"}}, "channels.eval is not a channel"),
        ({"dataset": "../etc"}, "dataset='../etc' is not a dataset path segment"),
        ({"dataset": "news", "distribution": "horovod"}, "payload.distribution='horovod' is not one of"),
        ({"dataset": "news", "entry_point": "train.sh"}, "payload.entry_point='train.sh' is not a file of the training code bundle: name a script inside source_dir"),
        ({"dataset": "news", "instance_count": 0}, "payload.instance_count=0 is not a positive whole number"),
        ({"dataset": "news", "instance_count": True}, "payload.instance_count=True is not a positive"),
        ({"dataset": "news", "instance_type": "p4d.24xlarge"}, "is not a SageMaker instance type"),
        ({"dataset": "news", "spot": "yes"}, "payload.spot='yes' is not true or false"),
        ({"dataset": "news", "tensorboard": 1}, "payload.tensorboard=1 is not true or false"),
        ({"dataset": "news", "dry_run": "true"}, "dry_run='true' is not true or false"),
        ({"dataset": "news", "tags": {"cost": 3}}, "payload.tags={'cost': 3} is not an object of strings"),
        ({"dataset": "news", "hyperparameters": {"layers": [512, 256]}}, "payload.hyperparameters.layers=[512, 256]"),
        ({"dataset": "news", "hyperparameters": {"sagemaker_program": "evil.py"}},
         "payload.hyperparameters.sagemaker_program is set by the trigger itself"),
    ],
)
def test_invalid_manual_payloads_name_the_field_and_fix(settings, payload, message):
    # Given a manual payload with one mistake
    # When it is parsed
    with pytest.raises(InvalidInput) as raised:
        parse_event(payload, settings)
    # Then the error names the field
    assert any(message in error for error in raised.value.errors), raised.value.errors


@pytest.mark.parametrize("uri", ["s3://", "s3:///train/", "s3://UPPER/train/", "s3://ab/train/", "s3://a b/train/",
                                 "s3://<data-bucket>/train/", "https://bucket/train/"])
def test_a_channel_uri_without_a_valid_bucket_is_refused(settings, uri):
    # Given a manual payload whose train channel is no S3 location
    payload = {"channels": {"train": uri}}
    # When it is parsed
    with pytest.raises(InvalidInput) as raised:
        parse_event(payload, settings)
    # Then the channel is named with the bucket rule
    assert any(error.startswith("channels.train=") and "3-63 lowercase" in error for error in raised.value.errors)


@pytest.mark.parametrize("event", [[], "dataset", 3, None, True])
def test_an_event_that_is_not_an_object_is_refused(settings, event):
    with pytest.raises(InvalidInput) as raised:
        parse_event(event, settings)
    assert raised.value.errors[0].startswith(f"event={event!r} is a {type(event).__name__}, not a JSON object")


def test_an_s3_event_missing_the_etag_is_refused_not_keyed_on_nothing(settings):
    # Given S3's EventBridge event with the object's ETag (the idempotency key) removed
    event = load_event("s3_eventbridge_object_created.json")
    del event["detail"]["object"]["etag"]
    # When it is parsed
    with pytest.raises(InvalidInput) as raised:
        parse_event(event, settings)
    # Then the missing field is named
    assert raised.value.errors[0].startswith("detail.object.etag=None is not a non-empty string")


def test_a_key_longer_than_s3_allows_is_refused(settings):
    event = load_event("s3_eventbridge_object_created.json")
    event["detail"]["object"]["key"] = "datasets/" + "d" * 1100 + "/v1/_SUCCESS"
    with pytest.raises(InvalidInput) as raised:
        parse_event(event, settings)
    assert "over S3's 1024-byte key limit" in raised.value.errors[0]
