"""The EventBridge `Object Created` event, built from the object S3 stored, as S3 would send it."""

from __future__ import annotations

import hashlib

import pytest
from aws_lambda_powertools.utilities.data_classes import S3EventBridgeNotificationEvent

from local_mode.aws.bucket_events import object_created_event
from local_mode.aws.local_clients import local_account_id

DATA_BUCKET = "local-mode-test-events"


@pytest.fixture(scope="module", autouse=True)
def data_bucket(moto) -> None:
    moto.create_buckets([DATA_BUCKET])


def test_the_event_carries_the_stored_objects_etag_size_and_sequencer(s3, moto):
    # Given a marker object stored in the data bucket
    key = "datasets/events/v1/_SUCCESS"
    body = b'{"training": {"epochs": 1}}'
    s3.put_object(Bucket=DATA_BUCKET, Key=key, Body=body)
    account = local_account_id(moto.url)

    # When its event is built
    event = S3EventBridgeNotificationEvent(object_created_event(s3, bucket=DATA_BUCKET, key=key, account=account))

    # Then Powertools reads it as S3 -> EventBridge, with the object's real ETag (MD5 for a single part) and size
    assert (event.source, event.detail_type, event.account) == ("aws.s3", "Object Created", account)
    assert (event.detail.bucket.name, event.detail.object.key) == (DATA_BUCKET, key)
    assert event.detail.object.etag == hashlib.md5(body).hexdigest()
    assert event.detail.object.size == len(body)
    # And the sequencer is the hexadecimal string S3 uses to order a key's events
    int(event.detail.object.sequencer, 16)
    assert event.detail.reason == "PutObject"


def test_a_rewritten_object_gets_the_new_etag(s3, moto):
    # Given an object that was overwritten with other content
    key = "datasets/events/v2/manifest.json"
    s3.put_object(Bucket=DATA_BUCKET, Key=key, Body=b"first")
    first = object_created_event(s3, bucket=DATA_BUCKET, key=key, account="local")
    s3.put_object(Bucket=DATA_BUCKET, Key=key, Body=b"second!")

    # When the event is built again
    second = object_created_event(s3, bucket=DATA_BUCKET, key=key, account="local")

    # Then it describes the stored object now, not the first one, and is a distinct delivery
    assert second["detail"]["object"]["etag"] == hashlib.md5(b"second!").hexdigest()
    assert second["detail"]["object"]["etag"] != first["detail"]["object"]["etag"]
    assert second["detail"]["object"]["size"] == len(b"second!")
    assert second["id"] != first["id"]
    assert second["detail"]["object"]["sequencer"] >= first["detail"]["object"]["sequencer"]
