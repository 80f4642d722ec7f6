"""The guards: cost ceilings, where channels may point, AWS's tagging rules and the CreateTrainingJob API's own
limits refuse a request before any AWS call, each error naming the field, the bad value and the fix."""

from __future__ import annotations

import datetime as dt
import io
import json

import pytest
from botocore.response import StreamingBody
from botocore.stub import ANY
from training_trigger.errors import InvalidInput
from training_trigger.events import parse_event
from training_trigger.limits import MAX_TAGS, service_limit_errors
from training_trigger.overrides import TRIGGER_TAG_KEYS
from training_trigger.preflight import preflight_errors
from training_trigger.request import build_training_job_request
from training_trigger.service import handle_event
from training_trigger.settings import SettingsError

from trigger.sample_inputs import DATA_BUCKET, TOPIC_ARN, job_spec, load_event, stack_settings, stack_static_settings

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics:UserWarning")

EXTRA_BUCKET = stack_static_settings()["extra_data_buckets"][0]
TRAIN_URI = f"s3://{DATA_BUCKET}/datasets/news/v1/train/"


def _refusal(payload, settings) -> str:
    """The joined errors of a manual payload the trigger must refuse while parsing it."""
    with pytest.raises(InvalidInput) as refused:
        parse_event(payload, settings)
    return " | ".join(refused.value.errors)


def _manual(**fields):
    return {"channels": {"train": TRAIN_URI}, **fields}


# --- cost ceilings -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("field", "value", "message"), [
    ("instance_count", 400, "payload.instance_count=400 exceeds the pipeline's ceiling max_instance_count=4: ask for "
                            "at most 4, or raise max_instance_count in the pipeline configuration"),
    ("max_runtime", 259201, "payload.max_runtime=259201 exceeds the pipeline's ceiling "
                            "max_runtime_ceiling_seconds=259200"),
])
def test_a_request_above_a_cost_ceiling_is_refused_naming_field_value_and_ceiling(settings, field, value, message):
    # Given a payload asking for more than the configured ceiling / When it is parsed / Then it is refused
    assert message in _refusal(_manual(**{field: value}), settings)


def test_a_request_at_the_ceilings_is_accepted(settings):
    # Given a payload asking for exactly the ceilings
    [request] = parse_event(_manual(instance_count=4, max_runtime=259200), settings)
    # Then it passes with them
    assert (request.overrides.instance_count, request.overrides.max_runtime) == (4, 259200)


@pytest.mark.parametrize(("environ", "message"), [
    ({"default_instance_count": 5}, "default_instance_count=5 exceeds max_instance_count=4"),
    ({"max_runtime_seconds": 300000}, "max_runtime_seconds=300000 exceeds max_runtime_ceiling_seconds=259200"),
    ({"max_instance_count": 0}, "max_instance_count=0 is below 1"),
])
def test_defaults_above_their_ceiling_are_a_deployment_error(environ, message):
    with pytest.raises(SettingsError, match=message):
        stack_settings(**environ)


def test_a_manifest_above_a_ceiling_is_refused_before_any_job(s3_stub, sns_stub, sagemaker_stub, settings):
    # Given a version whose manifest.json asks for 64 instances (the SageMaker Stubber has nothing queued)
    root = "datasets/web search/2026-11-01/"
    body = json.dumps({"training": {"instance_count": 64}}).encode()
    s3_stub.add_response("list_objects_v2", {
        "Contents": [{"Key": root + "manifest.json", "ETag": '"7b4ef1a3d1e26c2b5e0f3e9d7c1a8b42"', "Size": len(body),
                      "LastModified": dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)}],
        "CommonPrefixes": [{"Prefix": root + "train/"}]}, {"Bucket": DATA_BUCKET, "Prefix": root, "Delimiter": "/"})
    s3_stub.add_response("get_object", {"Body": StreamingBody(io.BytesIO(body), len(body))},
                         {"Bucket": DATA_BUCKET, "Key": root + "manifest.json"})
    sns_stub.add_response("publish", {"MessageId": "5b1e6f2c-0d8a-4d7e-9f1a-2b3c4d5e6f70"},
                          {"TopicArn": TOPIC_ARN, "Subject": ANY, "Message": ANY})
    # When its S3 notification arrives
    result = handle_event(load_event("s3_notification_put.json"), settings)
    # Then it is rejected naming the manifest field and the ceiling, and nothing was started
    assert result["status"] == "rejected"
    assert any("manifest.json training.instance_count=64 exceeds the pipeline's ceiling max_instance_count=4" in error
               for error in result["errors"]), result["errors"]


# --- where channels may point --------------------------------------------------------------------------------------

@pytest.mark.parametrize("uri", [TRAIN_URI, f"s3://{DATA_BUCKET}/datasets/web search/v1/train",
                                 f"s3://{EXTRA_BUCKET}/corpora/mslr/fold1/", f"s3://{EXTRA_BUCKET}"])
def test_channels_in_the_data_prefix_or_an_extra_bucket_are_accepted(settings, uri):
    [request] = parse_event({"channels": {"train": uri}}, settings)
    assert request.channels == {"train": uri}


@pytest.mark.parametrize(("uri", "message"), [
    ("s3://someone-elses-bucket/train/", "is in bucket 'someone-elses-bucket', which training jobs may not read: use "
                                         f"one of ['{DATA_BUCKET}', '{EXTRA_BUCKET}'], or add the bucket to "
                                         "extra_data_buckets"),
    (f"s3://{DATA_BUCKET}/models/train/", "lies outside 'datasets/', the only part of the data bucket training jobs "
                                          "may read"),
    (f"s3://{DATA_BUCKET}/datasets/news/../../models/", "has an empty, '.' or '..' path segment"),
    (f"s3://{DATA_BUCKET}/datasets/news/./v1/", "has an empty, '.' or '..' path segment"),
    (f"s3://{DATA_BUCKET}/datasets//news/v1/", "has an empty, '.' or '..' path segment"),
    (f"s3://{EXTRA_BUCKET}//train/", "has an empty, '.' or '..' path segment"),
    (f"s3://{DATA_BUCKET}/datasets/news/v1/{{train}}/", "holds ['{', '}'], which S3 advises against"),
    (f"s3://{DATA_BUCKET}/datasets/news/v1/tr\tain/", "holds ['\\t']"),
    (f"s3://{DATA_BUCKET}/datasets/{'d' * 1010}/", "characters, over SageMaker's 1024: shorten it"),
])
def test_channels_outside_the_readable_buckets_or_with_path_tricks_are_refused(settings, uri, message):
    errors = _refusal({"channels": {"train": uri}}, settings)
    assert "channels.train=" in errors and message in errors


# --- tags ----------------------------------------------------------------------------------------------------------

def test_tags_within_aws_rules_are_accepted_unicode_included(settings):
    tags = {"équipe": "recherche 検索", "cost-center": "ml/ranking@eu", "k" * 128: "v" * 256}
    [request] = parse_event(_manual(tags=tags), settings)
    assert request.overrides.tags == tags


@pytest.mark.parametrize(("tags", "message"), [
    ({"aws:team": "search"}, "payload.tags.aws:team: the tag key 'aws:team' starts with 'aws:', which AWS reserves"),
    ({"AWS:Team": "search"}, "the tag key 'AWS:Team' starts with 'aws:'"),
    ({"team": "Aws:search"}, "payload.tags.team: the tag value 'Aws:search' starts with 'aws:'"),
    ({"k" * 129: "v"}, "the tag key is 129 characters, over AWS's 128: shorten it"),
    ({"team": "v" * 257}, "payload.tags.team: the tag value is 257 characters, over AWS's 256"),
    ({"team": "search & rank"}, "payload.tags.team: the tag value 'search & rank' holds ['&'], which AWS tags do not "
                                "allow: use only letters, digits, spaces and _.:/=+-@"),
    ({"team#1": "x"}, "the tag key 'team#1' holds ['#']"),
    ({"": "x"}, "a tag key is empty"),
    ({"dataset": "mine"}, "payload.tags.dataset is a tag the trigger sets itself"),
    ({f"t{i}": "v" for i in range(MAX_TAGS - len(TRIGGER_TAG_KEYS) + 1)},
     f"payload.tags: 47 tags plus the trigger's own {len(TRIGGER_TAG_KEYS)} exceed AWS's 50 per resource: drop 1"),
])
def test_tags_aws_would_refuse_are_refused_naming_the_tag(settings, tags, message):
    assert message in _refusal(_manual(tags=tags), settings)


@pytest.mark.parametrize(("key", "message"), [
    ("datasets/q&a/v1/_SUCCESS", "detail.object.key (dataset, tagged on the job): the tag value 'q&a' holds ['&']"),
    ("datasets/news/aws:v1/_SUCCESS", "detail.object.key (version, tagged on the job): the tag value 'aws:v1' starts "
                                      "with 'aws:'"),
])
def test_a_marker_whose_folders_cannot_be_tags_is_refused(settings, key, message):
    # Given the EventBridge event of a marker under a folder name AWS tags cannot carry
    event = load_event("s3_eventbridge_object_created.json")
    event["detail"]["object"]["key"] = key
    # When it is parsed / Then it is refused naming the key, before any listing
    with pytest.raises(InvalidInput) as refused:
        parse_event(event, settings)
    assert message in " ".join(refused.value.errors)


def test_a_manual_dataset_name_that_cannot_be_a_tag_is_refused(settings):
    assert "dataset (tagged on the job): the tag value 'q&a' holds ['&']" in _refusal({"dataset": "q&a"}, settings)


# --- instance types, hyperparameter names --------------------------------------------------------------------------

@pytest.mark.parametrize(("instance_type", "message"), [
    ("ml.g5.12xlage", "payload.instance_type='ml.g5.12xlage' is not a training instance type SageMaker knows: did "
                      "you mean ['ml.g5.12xlarge'"),
    ("ml.G5.xlarge", "is not a SageMaker instance type: use the form ml.<family>.<size>"),
    ("g5.xlarge", "is not a SageMaker instance type"),
    (7, "payload.instance_type=7 is not a SageMaker instance type"),
])
def test_an_instance_type_sagemaker_does_not_know_is_refused_with_the_closest(settings, instance_type, message):
    assert message in _refusal(_manual(instance_type=instance_type), settings)


@pytest.mark.parametrize(("key", "message"), [
    ("learning\nrate", "the name holds a line break, which SageMaker refuses"),
    ("learning\u2028rate", "the name holds a line break"),
    ("", "payload.hyperparameters: a hyperparameter name is empty"),
    ("k" * 257, "the name is 257 characters, over SageMaker's 256"),
])
def test_hyperparameter_names_sagemaker_refuses_are_refused(settings, key, message):
    assert message in _refusal(_manual(hyperparameters={key: 1}), settings)


# --- the API model's limits on the built request -------------------------------------------------------------------

@pytest.mark.parametrize(("environ", "message"), [
    ({"default_instance_type": "ml.g5.13xlarge"}, "ResourceConfig.InstanceType='ml.g5.13xlarge' is not a value "
                                                  "SageMaker accepts: use one of ['ml.g5.16xlarge', 'ml.g5.12xlarge'"),
    ({"ROLE_ARN": "arn:aws:iam::1234:role/x"}, "RoleArn='arn:aws:iam::1234:role/x' does not match SageMaker's pattern"),
    ({"CHECKPOINT_S3_URI": "s3://ranker-artifacts-example/" + "c" * 1000 + "/"},
     "CheckpointConfig.S3Uri='s3://ranker-artifacts-example/ccccccccccccccccccccccccccccc...(1073 characters) is "
     "1071 characters, over SageMaker's 1024"),
    ({"KMS_KEY_ARN": "arn:aws:kms:eu-west-1:123456789012:key/my key"}, "OutputDataConfig.KmsKeyId="),
    ({"subnet_ids": [f"subnet-0{i}" for i in range(17)], "security_group_ids": ["sg-01"]},
     "VpcConfig.Subnets: 17 entries exceed SageMaker's 16"),
])
def test_settings_that_break_the_api_model_are_refused_before_the_call(environ, message):
    # Given a deployment whose settings break a limit botocore does not check, and a job on its defaults
    settings = stack_settings(**environ)
    spec = job_spec(instance_type=settings.default_instance_type)
    # When the built request is checked / Then the request field is named
    errors = preflight_errors(build_training_job_request(spec, settings), spec, settings)
    assert any(message in error for error in errors), errors


def test_javas_dot_does_not_cross_line_breaks():
    # Given a request whose checkpoint URI carries a line separator, which Java's `.` (the API's pattern) refuses
    request = {"CheckpointConfig": {"S3Uri": "s3://bucket/check\u2028points/", "LocalPath": "/opt/ml/checkpoints"}}
    # Then the pattern check names it, and a plain URI passes
    assert "does not match SageMaker's pattern" in " ".join(service_limit_errors(request))
    assert service_limit_errors({"CheckpointConfig": {"S3Uri": "s3://bucket/checkpoints/"}}) == []


def test_the_default_request_meets_every_limit(settings):
    request = build_training_job_request(job_spec(), settings)
    assert service_limit_errors(request) == []


def test_dataset_folders_that_are_no_channel_name_are_refused(s3_stub, sns_stub, sagemaker_stub, settings):
    # Given a complete version with a folder whose name SageMaker refuses as a channel name
    root = "datasets/web search/2026-11-01/"
    s3_stub.add_response("list_objects_v2", {
        "Contents": [{"Key": root + "_SUCCESS", "ETag": '"d41d8cd98f00b204e9800998ecf8427e"', "Size": 0,
                      "LastModified": dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)}],
        "CommonPrefixes": [{"Prefix": root + "train/"}, {"Prefix": root + "hold out/"}]},
        {"Bucket": DATA_BUCKET, "Prefix": root, "Delimiter": "/"})
    sns_stub.add_response("publish", {"MessageId": "5b1e6f2c-0d8a-4d7e-9f1a-2b3c4d5e6f70"},
                          {"TopicArn": TOPIC_ARN, "Subject": ANY, "Message": ANY})
    # When its marker event arrives (the SageMaker Stubber has nothing queued: a call would fail the test)
    result = handle_event(load_event("s3_eventbridge_object_created.json"), settings)
    # Then it is rejected naming the folder and the rule
    assert result["status"] == "rejected"
    assert any("'hold out' is not a SageMaker channel name: rename the folder" in error for error in result["errors"])
