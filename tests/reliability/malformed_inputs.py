"""Hypothesis strategies for input the trigger must refuse: each example is a `Malformed` event (and, for a
dataset closed by manifest.json, the manifest's body) plus the text its rejection must name: the bad field.

Every example starts from something the trigger accepts and breaks exactly one thing, so the named field is the
only reason to refuse it. Nothing here may ever produce a valid request: the test fails on any CreateTrainingJob.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote_plus

from hypothesis import strategies as st
from training_trigger.events import CHANNEL_NAMES, MANUAL_FIELDS
from training_trigger.limits import (
    JAVA_LINE_TERMINATORS,
    MAX_TAG_KEY_LENGTH,
    MAX_TAG_VALUE_LENGTH,
    MAX_TAGS,
    S3_KEY_SYMBOLS,
    is_tag_character,
    known_instance_types,
)
from training_trigger.overrides import TRIGGER_TAG_KEYS
from training_trigger.settings import DISTRIBUTIONS
from trigger.sample_inputs import BUNDLE_FILES, load_event, stack_static_settings

from reliability.local_dataset import DATA_BUCKET, DATASET, MANIFEST_DATASET, MANIFEST_KEY, VERSION

GOOD_URI = f"s3://{DATA_BUCKET}/datasets/{DATASET}/{VERSION}/train/"
S3_KEY_LIMIT = 1024  # bytes of UTF-8
STACK = stack_static_settings()
MAX_INSTANCE_COUNT, MAX_RUNTIME_CEILING = STACK["max_instance_count"], STACK["max_runtime_ceiling_seconds"]
READABLE_BUCKETS = (DATA_BUCKET, *STACK["extra_data_buckets"])


@dataclass(frozen=True)
class Malformed:
    event: Any
    names: str  # the result's errors or reason must contain this
    manifest: bytes | None = None  # written to MANIFEST_KEY before the event is handled


# Values of every JSON type; each field's strategy keeps only the ones that are wrong for it.
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                         st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=12))
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=6,
)
non_strings = json_values.filter(lambda value: not isinstance(value, str))
non_booleans = json_values.filter(lambda value: not isinstance(value, bool))
non_objects = json_values.filter(lambda value: not isinstance(value, dict))
not_positive_integers = st.one_of(st.integers(max_value=0), st.booleans(), st.floats(allow_nan=False),
                                  st.text(max_size=6), st.lists(st.integers(), max_size=2))
unicode_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=40)
# Text AWS accepts as a tag value (dataset and version names become tags), and text with a character it refuses.
tag_text = unicode_text.filter(lambda text: all(map(is_tag_character, text)) and not text.lower().startswith("aws:"))
untaggable_text = st.builds(lambda head, bad, tail: head + bad + tail, tag_text | st.just(""),
                            st.characters(codec="utf-8", exclude_categories=("Cs",)).filter(
                                lambda char: not is_tag_character(char) and char != "/"), tag_text | st.just(""))


def _manual(**changes: Any) -> dict[str, Any]:
    return {"dataset": DATASET, "version": VERSION, **changes}


def _one_bad_field(name: str, values: st.SearchStrategy[Any]) -> st.SearchStrategy[Malformed]:
    return values.map(lambda value: Malformed(_manual(**{name: value}), f"{name}="))


bad_s3_uris = st.one_of(
    non_strings,
    unicode_text.filter(lambda text: not text.startswith("s3://")),
    st.sampled_from(["s3://", "s3:///train/", "s3://UPPER-case/train/", "s3://ab/train/", "s3://bucket name/train/",
                     "s3://-bucket/train/", "https://example.com/train/", f"S3://{DATA_BUCKET}/train/",
                     "s3://" + "b" * 64 + "/train/"]),
)
reserved_keys = st.text(max_size=20).map(lambda suffix: "sagemaker_" + suffix)
bad_job_names = st.one_of(
    unicode_text.map(lambda name: "other-" + name),
    unicode_text.filter(lambda text: any(not (char.isascii() and (char.isalnum() or char == "-")) for char in text))
    .map(lambda name: "ranker-" + name),
    st.integers(64, 200).map(lambda length: "ranker-" + "a" * length),
)

bucket_names = st.from_regex(r"[a-z0-9][a-z0-9-]{1,30}[a-z0-9]", fullmatch=True).filter(
    lambda name: name not in READABLE_BUCKETS)
key_segments = st.text(st.sampled_from("abcxyz019-_"), min_size=1, max_size=8)
# A key with one path trick: an empty, '.' or '..' segment somewhere in an otherwise good dataset key.
tricked_keys = st.builds(lambda head, trick, tail: "/".join(["datasets", *head, trick, *tail]) + "/",
                         st.lists(key_segments, max_size=2), st.sampled_from(["", ".", ".."]),
                         st.lists(key_segments, min_size=1, max_size=2))
odd_key_characters = st.characters(codec="utf-8", exclude_categories=("Cs",)).filter(
    lambda char: not (char.isalnum() or char in S3_KEY_SYMBOLS or char == "/"))
reserved_prefixes = st.sampled_from(["aws:", "AWS:", "Aws:", "aWs:"])
bad_tags = st.one_of(
    st.builds(lambda prefix, rest, value: {prefix + rest: value}, reserved_prefixes, tag_text, tag_text),
    st.builds(lambda key, prefix, rest: {key: prefix + rest}, tag_text, reserved_prefixes, tag_text),
    st.integers(MAX_TAG_KEY_LENGTH + 1, 400).map(lambda length: {"k" * length: "v"}),
    st.integers(MAX_TAG_VALUE_LENGTH + 1, 600).map(lambda length: {"team": "v" * length}),
    untaggable_text.map(lambda key: {key: "v"}),
    untaggable_text.map(lambda value: {"team": value}),
    st.sampled_from(TRIGGER_TAG_KEYS).map(lambda key: {key: "mine"}),
    st.integers(MAX_TAGS - len(TRIGGER_TAG_KEYS) + 1, 120).map(lambda count: {f"t{i}": "v" for i in range(count)}),
)
unknown_instance_types = st.from_regex(r"ml\.[a-z][a-z0-9]{0,4}\.[a-z0-9]{1,9}", fullmatch=True).filter(
    lambda name: name not in known_instance_types())

# Payloads past the shape checks that AWS, IAM or the budget would refuse later: cost ceilings, where channels may
# point, AWS's tag rules, SageMaker's instance types and names.
guarded_payloads = st.one_of(
    _one_bad_field("instance_count", st.integers(MAX_INSTANCE_COUNT + 1, 10**9)),
    _one_bad_field("max_runtime", st.integers(MAX_RUNTIME_CEILING + 1, 10**9)),
    _one_bad_field("instance_type", unknown_instance_types),
    bad_tags.map(lambda tags: Malformed(_manual(tags=tags), "payload.tags")),
    st.builds(lambda head, breaker, tail: Malformed(_manual(hyperparameters={head + breaker + tail: 1}),
                                                    "payload.hyperparameters"),
              st.text(max_size=5), st.sampled_from(JAVA_LINE_TERMINATORS), st.text(max_size=5)),
    untaggable_text.filter(lambda name: len(name.encode()) <= S3_KEY_LIMIT and name not in (".", "..")).map(
        lambda name: Malformed({"dataset": name}, "dataset")),
    st.builds(lambda bucket, key: Malformed({"channels": {"train": f"s3://{bucket}/{key}"}}, "channels.train="),
              bucket_names, st.lists(key_segments, max_size=3).map("/".join)),
    st.builds(lambda prefix, key: Malformed({"channels": {"train": f"s3://{DATA_BUCKET}/{prefix}/{key}"}},
                                            "channels.train="),
              key_segments.filter(lambda segment: segment != "datasets"), st.lists(key_segments, max_size=3).map("/".join)),
    st.builds(lambda bucket, key: Malformed({"channels": {"train": f"s3://{bucket}/{key}"}}, "channels.train="),
              st.sampled_from(READABLE_BUCKETS), tricked_keys),
    st.builds(lambda bucket, head, char: Malformed({"channels": {"train": f"s3://{bucket}/datasets/{head}{char}/"}},
                                                   "channels.train="),
              st.sampled_from(READABLE_BUCKETS), key_segments, odd_key_characters),
)

manual_payloads = st.one_of(
    _one_bad_field("dataset", non_strings.filter(lambda value: value is not None)),
    _one_bad_field("dataset", st.sampled_from(["..", ".", "a/b", "web search/2026-11-01", "x\x00y", "tab\there"])),
    _one_bad_field("dataset", st.integers(S3_KEY_LIMIT + 1, 3000).map(lambda length: "d" * length)),
    _one_bad_field("version", non_strings.filter(lambda value: value is not None)),
    _one_bad_field("channels", non_objects),
    _one_bad_field("job_name", non_strings.filter(lambda value: value is not None)),
    _one_bad_field("job_name", bad_job_names),
    _one_bad_field("dry_run", non_booleans),
    _one_bad_field("entry_point", json_values.filter(lambda value: value is not None and value not in BUNDLE_FILES)),
    _one_bad_field("distribution", json_values.filter(lambda value: value is not None and value not in DISTRIBUTIONS)),
    _one_bad_field("instance_type", json_values.filter(
        lambda value: value is not None and not (isinstance(value, str) and value.startswith("ml.")))),
    _one_bad_field("instance_count", not_positive_integers),
    _one_bad_field("max_runtime", not_positive_integers),
    _one_bad_field("spot", non_booleans.filter(lambda value: value is not None)),
    _one_bad_field("hyperparameters", non_objects.filter(lambda value: value is not None)),
    _one_bad_field("tags", json_values.filter(lambda value: value is not None and not (
        isinstance(value, dict) and all(isinstance(item, str) for item in value.values())))),
    st.builds(lambda key, value: Malformed(_manual(hyperparameters={key: value}), f"hyperparameters.{key}"),
              reserved_keys, json_scalars),
    st.builds(lambda key, value: Malformed(_manual(hyperparameters={key: value}), f"hyperparameters.{key}="),
              st.text(min_size=1, max_size=10).filter(lambda key: not key.startswith("sagemaker_")),
              st.one_of(st.none(), st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3),
                                                                                        st.integers(), max_size=2))),
    st.integers(2501, 4000).map(lambda length: Malformed(_manual(hyperparameters={"notes": "é" * length}),
                                                         "hyperparameters.notes")),
    st.integers(257, 600).map(lambda length: Malformed(_manual(hyperparameters={"k" * length: 1}), "hyperparameters.")),
    st.builds(lambda name, value: Malformed(_manual(**{name: value}), f"{name} is not a payload field"),
              unicode_text.filter(lambda name: name not in MANUAL_FIELDS), json_values),
    bad_s3_uris.map(lambda uri: Malformed({"channels": {"train": uri}}, "channels.train")),
    unicode_text.filter(lambda name: name not in CHANNEL_NAMES).map(
        lambda name: Malformed({"channels": {name: GOOD_URI}}, f"channels.{name}")),
    st.just(Malformed({"version": VERSION, "channels": {"train": GOOD_URI}}, "version=")),
    st.just(Malformed({"dataset": DATASET, "channels": {"train": GOOD_URI}}, "exactly one of dataset")),
    st.just(Malformed({}, "exactly one of dataset")),
    tag_text.filter(lambda name: "/" not in name and name not in (DATASET, MANIFEST_DATASET, ".", "..")).map(
        lambda name: Malformed({"dataset": name}, "has no complete version")),
)

not_objects = st.one_of(st.lists(json_values, max_size=3), json_scalars).map(lambda event: Malformed(event, "event"))


def _eventbridge(key: str, *, bucket: str = DATA_BUCKET) -> dict[str, Any]:
    event = load_event("s3_eventbridge_object_created.json")
    event["detail"]["bucket"]["name"] = bucket
    event["detail"]["object"]["key"] = quote_plus(key, safe="/")  # as S3 sends it: URL-encoded
    return event


def _notification(key: str) -> dict[str, Any]:
    event = load_event("s3_notification_put.json")
    event["Records"][0]["s3"]["bucket"]["name"] = DATA_BUCKET
    event["Records"][0]["s3"]["object"]["key"] = quote_plus(key, safe="/")
    return event


def _broken(event: dict[str, Any], path: tuple[str | int, ...], value: Any, *, delete: bool) -> dict[str, Any]:
    broken = copy.deepcopy(event)
    parent = broken
    for part in path[:-1]:
        parent = parent[part]
    if delete:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return broken


def _path_name(path: tuple[str | int, ...]) -> str:
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in path).lstrip(".")


EVENTBRIDGE_FIELDS = [("detail",), ("detail", "bucket"), ("detail", "bucket", "name"), ("detail", "object"),
                      ("detail", "object", "key"), ("detail", "object", "etag")]
NOTIFICATION_FIELDS = [("Records",), ("Records", 0), ("Records", 0, "eventName"), ("Records", 0, "s3"),
                       ("Records", 0, "s3", "bucket", "name"), ("Records", 0, "s3", "object"),
                       ("Records", 0, "s3", "object", "key"), ("Records", 0, "s3", "object", "eTag")]


def _structural(template: dict[str, Any], fields: list[tuple[str | int, ...]],
                wrong: st.SearchStrategy[Any]) -> st.SearchStrategy[Malformed]:
    """One field of a real event deleted or replaced by a value of the wrong type. A deleted list item leaves its
    list short, so the list is what must be named; the top-level key is only replaced (without it, the event is
    another kind)."""
    def malformed(path: tuple[str | int, ...], value: Any, delete: bool) -> Malformed:
        delete = delete and len(path) > 1
        named = path[:-1] if delete and isinstance(path[-1], int) else path
        return Malformed(_broken(template, path, value, delete=delete), _path_name(named))

    return st.builds(malformed, st.sampled_from(fields), wrong, st.booleans())


s3_events = st.one_of(
    _structural(_eventbridge(f"datasets/{DATASET}/{VERSION}/_SUCCESS"), EVENTBRIDGE_FIELDS,
                json_values.filter(lambda value: not isinstance(value, (str, dict)))),
    _structural(_notification(f"datasets/{DATASET}/{VERSION}/_SUCCESS"), NOTIFICATION_FIELDS,
                json_values.filter(lambda value: not isinstance(value, (str, dict, list)))),
    # Keys that are no marker, unicode or not: ignored, naming the key.
    unicode_text.filter(lambda key: not key.startswith("datasets/")).map(
        lambda key: Malformed(_eventbridge(key), key)),
    st.builds(lambda name, channel: Malformed(_eventbridge(f"datasets/{DATASET}/{VERSION}/{channel}/{name}"), name),
              unicode_text.filter(lambda name: "/" not in name), st.sampled_from(CHANNEL_NAMES)),
    unicode_text.filter(lambda name: name != DATA_BUCKET).map(
        lambda bucket: Malformed(_eventbridge(f"datasets/{DATASET}/{VERSION}/_SUCCESS", bucket=bucket), bucket)),
    # A marker of a version that does not exist: rejected, naming the dataset.
    tag_text.filter(lambda name: "/" not in name and name not in (DATASET, MANIFEST_DATASET, ".", "..")).map(
        lambda name: Malformed(_eventbridge(f"datasets/{name}/{VERSION}/_SUCCESS"), "has no marker")),
    # A marker under a folder name that AWS tags cannot carry (the job is tagged with it): refused, naming the key.
    untaggable_text.filter(lambda name: "/" not in name).map(
        lambda name: Malformed(_eventbridge(f"datasets/{name}/{VERSION}/_SUCCESS"), "detail.object.key")),
    # Keys longer than S3 allows cannot name a stored object.
    st.integers(S3_KEY_LIMIT - 20, 3000).map(
        lambda length: Malformed(_eventbridge(f"datasets/{'é' * length}/{VERSION}/_SUCCESS"), "detail.object.key")),
)


def _manifest_event(body: bytes, names: str) -> Malformed:
    return Malformed(_eventbridge(MANIFEST_KEY), names, manifest=body)


def _is_json(body: bytes) -> bool:
    try:
        json.loads(body)
    except ValueError:
        return False
    return True


TRAINING = "manifest.json training"
manifests = st.one_of(
    st.binary(max_size=40).filter(lambda body: not _is_json(body)).map(lambda body: _manifest_event(body, "JSON")),
    non_objects.map(lambda value: _manifest_event(json.dumps(value).encode(), "not an object")),
    non_objects.filter(lambda value: value is not None).map(
        lambda value: _manifest_event(json.dumps({"training": value}).encode(), f"{TRAINING}=")),
    st.builds(lambda name, value: _manifest_event(json.dumps({"training": {name: value}}).encode(),
                                                  f"{TRAINING}.{name}"),
              unicode_text.filter(lambda name: name not in ("entry_point", "distribution", "instance_type",
                                                            "instance_count", "hyperparameters", "spot",
                                                            "max_runtime", "tags")), json_values),
    not_positive_integers.map(lambda count: _manifest_event(
        json.dumps({"training": {"instance_count": count}}).encode(), f"{TRAINING}.instance_count")),
    json_values.filter(lambda value: value is not None and value not in DISTRIBUTIONS).map(
        lambda value: _manifest_event(json.dumps({"training": {"distribution": value}}).encode(),
                                      f"{TRAINING}.distribution")),
    reserved_keys.map(lambda key: _manifest_event(
        json.dumps({"training": {"hyperparameters": {key: 1}}}).encode(), f"{TRAINING}.hyperparameters.{key}")),
    st.integers(MAX_INSTANCE_COUNT + 1, 10**9).map(lambda count: _manifest_event(
        json.dumps({"training": {"instance_count": count}}).encode(), f"{TRAINING}.instance_count={count} exceeds")),
    st.integers(MAX_RUNTIME_CEILING + 1, 10**9).map(lambda seconds: _manifest_event(
        json.dumps({"training": {"max_runtime": seconds}}).encode(), f"{TRAINING}.max_runtime={seconds} exceeds")),
    bad_tags.map(lambda tags: _manifest_event(json.dumps({"training": {"tags": tags}}).encode(), f"{TRAINING}.tags")),
    unknown_instance_types.map(lambda name: _manifest_event(
        json.dumps({"training": {"instance_type": name}}).encode(), f"{TRAINING}.instance_type")),
)
