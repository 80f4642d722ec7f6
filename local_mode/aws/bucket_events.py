"""The EventBridge `Object Created` event S3 sends for a stored object (real ETag, size and sequencer)."""

from __future__ import annotations

import uuid
from typing import Any

from local_mode.aws.local_clients import LOCAL_REGION


def object_created_event(s3: Any, *, bucket: str, key: str, account: str) -> dict[str, Any]:
    """The event as EventBridge delivers it, built from the object's HEAD (the sequencer from its LastModified)."""
    head = s3.head_object(Bucket=bucket, Key=key)
    modified = head["LastModified"]
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Object Created",
        "source": "aws.s3",
        "account": account,
        "time": modified.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": LOCAL_REGION,
        "resources": [f"arn:aws:s3:::{bucket}"],
        "detail": {
            "version": "0",
            "bucket": {"name": bucket},
            "object": {"key": key, "size": head["ContentLength"], "etag": head["ETag"].strip('"'),
                       # S3's sequencer orders events per key: a hex string that grows with each write.
                       "sequencer": f"{int(modified.timestamp() * 1_000_000):016X}"},
            "request-id": head["ResponseMetadata"]["RequestId"],
            "requester": account,
            "source-ip-address": "127.0.0.1",
            "reason": "PutObject",
        },
    }
