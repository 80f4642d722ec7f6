"""The handler end to end, with botocore Stubbers on the real S3, SageMaker and SNS clients.

The Stubbers validate every request against the service models, and any call a test did not expect fails it:
that is how "never calls CreateTrainingJob" is proven.
"""

from __future__ import annotations

import copy
import datetime as dt
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path

import handler
import pytest
from botocore.response import StreamingBody
from botocore.stub import ANY

from trigger.sample_inputs import (
    DATA_BUCKET,
    EVENTS_DIR,
    TOPIC_ARN,
    load_event,
    stack_static_settings,
    write_stack_settings,
)

# Ignored events and dry runs emit no metric, which Powertools warns about; that is the expected outcome here.
pytestmark = pytest.mark.filterwarnings("ignore:No application metrics:UserWarning")

VERSION_ROOT = "datasets/web search/2026-11-01/"
MARKER_ETAG = "d41d8cd98f00b204e9800998ecf8427e"


@dataclass
class LambdaContext:
    function_name: str = "ranker-training-trigger"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:eu-west-1:123456789012:function:ranker-training-trigger"
    aws_request_id: str = "0f6f7f7e-2d2a-4a1e-9d59-6d0a4c3f2b11"


@pytest.fixture(autouse=True)
def stack_environment(monkeypatch, tmp_path):
    for name, value in write_stack_settings(tmp_path).items():
        monkeypatch.setenv(name, value)
    from training_trigger.settings import load_settings

    load_settings.cache_clear()
    yield
    load_settings.cache_clear()


@pytest.fixture
def sent_requests(sagemaker_stub):
    """What reached CreateTrainingJob, read off the real client's event hooks."""
    sent = []
    event_name = "before-parameter-build.sagemaker.CreateTrainingJob"
    capture = lambda params, **_: sent.append(dict(params))  # noqa: E731
    sagemaker_stub.client.meta.events.register_first(event_name, capture)
    yield sent
    sagemaker_stub.client.meta.events.unregister(event_name, capture)


def _version_listing(s3_stub, files: dict[str, str], channels=("train", "validation", "test")):
    """One ListObjectsV2 page of a complete version: root files (name -> ETag) and channel prefixes."""
    s3_stub.add_response(
        "list_objects_v2",
        {"Contents": [{"Key": VERSION_ROOT + name, "ETag": f'"{etag}"', "Size": 0,
                       "LastModified": dt.datetime(2026, 11, 1, 6, 12, tzinfo=dt.timezone.utc)}
                      for name, etag in files.items()],
         "CommonPrefixes": [{"Prefix": f"{VERSION_ROOT}{channel}/"} for channel in channels]},
        {"Bucket": DATA_BUCKET, "Prefix": VERSION_ROOT, "Delimiter": "/"},
    )


def _invoke(event):
    return handler.lambda_handler(event, LambdaContext())


def test_marker_event_starts_one_job_on_the_discovered_channels(s3_stub, sagemaker_stub, capsys):
    # Given a complete version with three channels and the EventBridge event for its marker
    _version_listing(s3_stub, {"_SUCCESS": MARKER_ETAG})
    sagemaker_stub.add_response("create_training_job", {"TrainingJobArn": "arn:aws:sagemaker:eu-west-1:"
                                                        "123456789012:training-job/ranker-x"})
    # When the handler runs
    result = _invoke(load_event("s3_eventbridge_object_created.json"))
    # Then a job with a deterministic name is started and counted
    assert result["status"] == "started"
    assert result["job_name"].startswith("ranker-web-search-2026-11-01-")
    assert '"JobsStarted"' in capsys.readouterr().out


def test_request_sent_carries_channels_and_provenance_tags(s3_stub, sagemaker_stub, sent_requests):
    _version_listing(s3_stub, {"_SUCCESS": MARKER_ETAG})
    sagemaker_stub.add_response("create_training_job", {"TrainingJobArn": "arn:aws:sagemaker:eu-west-1:"
                                                        "123456789012:training-job/ranker-x"})
    _invoke(load_event("s3_eventbridge_object_created.json"))
    [sent] = sent_requests
    channels = {c["ChannelName"]: c["DataSource"]["S3DataSource"]["S3Uri"] for c in sent["InputDataConfig"]}
    assert channels == {name: f"s3://{DATA_BUCKET}/{VERSION_ROOT}{name}/" for name in ("test", "train", "validation")}
    tags = {tag["Key"]: tag["Value"] for tag in sent["Tags"]}
    assert tags == {"trigger-source": "s3-eventbridge", "dataset": "web search", "dataset-version": "2026-11-01",
                    "marker-etag": MARKER_ETAG}


def test_the_same_event_twice_is_reported_as_duplicate(s3_stub, sagemaker_stub, capsys):
    # Given SageMaker already holds a job of that name
    event = load_event("s3_eventbridge_object_created.json")
    for _ in range(2):
        _version_listing(s3_stub, {"_SUCCESS": MARKER_ETAG})
    sagemaker_stub.add_response("create_training_job", {"TrainingJobArn": "arn:aws:sagemaker:eu-west-1:"
                                                        "123456789012:training-job/ranker-x"})
    sagemaker_stub.add_client_error("create_training_job", service_error_code="ResourceInUse",
                                    service_message="Training job names must be unique within an account and region")
    # When the event arrives twice
    first, second = _invoke(event), _invoke(event)
    # Then the second is a duplicate of the first, not an error
    assert (first["status"], second["status"]) == ("started", "duplicate")
    assert first["job_name"] == second["job_name"]
    assert '"DuplicateEvents"' in capsys.readouterr().out


def _started_job_name(s3_stub, sagemaker_stub, event) -> str:
    """The name of the job the marker event starts, with SageMaker accepting it."""
    _version_listing(s3_stub, {"_SUCCESS": MARKER_ETAG})
    sagemaker_stub.add_response("create_training_job", {"TrainingJobArn": "arn:aws:sagemaker:eu-west-1:"
                                                        "123456789012:training-job/ranker-x"})
    result = _invoke(event)
    assert result["status"] == "started"
    return result["job_name"]


def _redeploy(monkeypatch, folder, **changes) -> None:
    """The stack deployed again with `changes`: UPPER_CASE names in the environment, lower_case ones in the bundle's
    settings file (written anew into `folder`)."""
    from training_trigger.settings import load_settings

    static = {name: value for name, value in changes.items() if not name.isupper()}
    environment = {name: value for name, value in changes.items() if name.isupper()}
    environment["STATIC_SETTINGS_FILE"] = write_stack_settings(folder, **static)["STATIC_SETTINGS_FILE"]
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    load_settings.cache_clear()


@pytest.mark.parametrize("changes", [
    {"SOURCE_BUNDLE_URI": "s3://ranker-artifacts-example/code/77d0e4c5/sourcedir.tar.gz"},  # new training code
    {"default_hyperparameters": {"epochs": 20, "loss": "listwise"}},
    {"default_instance_count": 2},
    {"TRAINING_IMAGE_URI": "763104351884.dkr.ecr.eu-west-1.amazonaws.com/pytorch-training:2.1.0-gpu-py310"},
], ids=["training-code", "default-hyperparameters", "instance-count", "image"])
def test_the_same_marker_after_a_redeploy_with_new_code_or_settings_starts_a_new_job(s3_stub, sagemaker_stub,
                                                                                     monkeypatch, tmp_path, changes):
    # Given the marker event started a job
    event = load_event("s3_eventbridge_object_created.json")
    before = _started_job_name(s3_stub, sagemaker_stub, event)
    # When the stack is redeployed with new training code or new job settings and the event arrives again
    redeployed = tmp_path / "redeployed"
    redeployed.mkdir()
    _redeploy(monkeypatch, redeployed, **changes)
    after = _started_job_name(s3_stub, sagemaker_stub, event)
    # Then it is another job, not a duplicate of the one that ran the old code or settings
    assert before != after
    assert after.startswith("ranker-web-search-2026-11-01-")


def test_a_marker_written_again_with_the_same_bytes_starts_a_new_job(s3_stub, sagemaker_stub):
    # Given the marker event started a job
    event = load_event("s3_eventbridge_object_created.json")
    first = _started_job_name(s3_stub, sagemaker_stub, event)
    # When the same empty marker is uploaded again: same ETag, a new object version in the versioned bucket
    rewritten = copy.deepcopy(event)
    rewritten["detail"]["object"]["version-id"] = "Qs9_UVbwpVaDx5hBkCk0Fc3SCfzX1Luu"
    second = _started_job_name(s3_stub, sagemaker_stub, rewritten)
    # Then it asks for a new job
    assert first != second


def _newest_version_listing(s3_stub):
    """The listings a schedule reads: one dataset, one version, then that version's root."""
    s3_stub.add_response("list_objects_v2", {"CommonPrefixes": [{"Prefix": "datasets/web search/"}]},
                         {"Bucket": DATA_BUCKET, "Prefix": "datasets/", "Delimiter": "/"})
    s3_stub.add_response("list_objects_v2", {"CommonPrefixes": [{"Prefix": VERSION_ROOT}]},
                         {"Bucket": DATA_BUCKET, "Prefix": "datasets/web search/", "Delimiter": "/"})
    _version_listing(s3_stub, {"_SUCCESS": MARKER_ETAG})


def test_the_retrain_schedule_retrains_on_every_tick_and_once_per_tick(s3_stub, sagemaker_stub):
    # Given the newest complete version already trained, and two ticks of the schedule, the first delivered twice
    tick = load_event("schedule.json")
    next_tick = {**tick, "id": "0b2f6c1e-4d1a-4c55-8f0e-6a7d2e9c3b10", "time": "2026-11-09T03:00:00Z"}
    names = []
    for event in (tick, tick, next_tick):
        _newest_version_listing(s3_stub)
        sagemaker_stub.add_response("create_training_job", {"TrainingJobArn": "arn:aws:sagemaker:eu-west-1:"
                                                            "123456789012:training-job/ranker-x"})
        # When each is handled
        result = _invoke(event)
        names.append(result["job_name"])
    # Then every tick retrains the newest version although no new version arrived, and a redelivered tick asks
    # for the same job again (SageMaker refuses the name a second time)
    assert names[0] == names[1] != names[2]
    assert all(name.startswith("ranker-web-search-2026-11-01-") for name in names)


def test_a_version_without_folders_is_refused_first_for_its_missing_train_folder(s3_stub, sns_stub, sagemaker_stub):
    # Given a version whose upload wrote its marker and no data (an empty data folder)
    _version_listing(s3_stub, {"_SUCCESS": MARKER_ETAG}, channels=())
    _expect_rejection_notice(sns_stub)
    # When its marker event arrives (the SageMaker Stubber has nothing queued: any call fails the test)
    result = _invoke(load_event("s3_eventbridge_object_created.json"))
    # Then the first (and only) error says what the data lacks and how to fix it, with no API jargon about an empty
    # InputDataConfig
    assert result["status"] == "rejected"
    assert result["errors"] == [
        f"s3://{DATA_BUCKET}/{VERSION_ROOT} has no 'train' folder (it holds no folder, only its marker), which the "
        f"training scripts require: upload the training data under s3://{DATA_BUCKET}/{VERSION_ROOT}train/ and write "
        f"the marker again"]


def test_explicit_channels_without_train_are_refused_naming_the_channel(sns_stub, sagemaker_stub):
    _expect_rejection_notice(sns_stub)
    result = _invoke({"channels": {"validation": f"s3://{DATA_BUCKET}/datasets/web search/2026-11-01/validation/"},
                      "dry_run": True})
    assert result["errors"] == ["channels: ['validation'] has no 'train' channel, which the training scripts require: "
                                "give channels.train"]


def test_manifest_overrides_the_defaults(s3_stub, sagemaker_stub, sent_requests):
    # Given a version closed by a manifest.json that asks for another instance, mode and hyperparameters
    manifest_bytes = (EVENTS_DIR / "manifest.json").read_bytes()
    training = json.loads(manifest_bytes)["training"]
    _version_listing(s3_stub, {"manifest.json": "7b4ef1a3d1e26c2b5e0f3e9d7c1a8b42"})
    s3_stub.add_response("get_object", {"Body": StreamingBody(io.BytesIO(manifest_bytes), len(manifest_bytes))},
                         {"Bucket": DATA_BUCKET, "Key": VERSION_ROOT + "manifest.json"})
    sagemaker_stub.add_response("create_training_job", {"TrainingJobArn": "arn:aws:sagemaker:eu-west-1:"
                                                        "123456789012:training-job/ranker-x"})
    # When the classic S3 notification for it arrives
    result = _invoke(load_event("s3_notification_put.json"))
    # Then the manifest's overrides win over the stack's defaults, which fill the rest
    [sent] = sent_requests
    assert result["status"] == "started"
    assert sent["ResourceConfig"]["InstanceType"] == training["instance_type"]
    assert sent["HyperParameters"]["sagemaker_torch_distributed_enabled"] == "true"
    assert sent["HyperParameters"]["loss"] == json.dumps(training["hyperparameters"]["loss"])
    assert sent["HyperParameters"]["epochs"] == json.dumps(training["hyperparameters"]["epochs"])
    assert sent["HyperParameters"]["sagemaker_program"] == json.dumps(stack_static_settings()["default_entry_point"])
    assert {"Key": "export-run", "Value": training["tags"]["export-run"]} in sent["Tags"]


def test_manual_dry_run_returns_the_checked_request_and_starts_nothing(s3_stub, sagemaker_stub):
    # Given the documented manual dataset payload (dry_run: true)
    payload = load_event("manual_dataset.json")
    _version_listing(s3_stub, {"_SUCCESS": MARKER_ETAG})
    # When it is invoked (the SageMaker Stubber has no response queued: a create call would fail the test)
    result = _invoke(payload)
    # Then the request reflects the payload
    assert result["status"] == "dry_run"
    request = result["request"]
    assert request["ResourceConfig"]["InstanceType"] == payload["instance_type"]
    assert request["ResourceConfig"]["InstanceCount"] == payload["instance_count"]
    assert request["HyperParameters"]["loss"] == json.dumps(payload["hyperparameters"]["loss"])
    assert request["HyperParameters"]["sagemaker_torch_distributed_enabled"] == "true"
    assert request["StoppingCondition"]["MaxRuntimeInSeconds"] == payload["max_runtime"]
    assert result["job_name"] != _invoke_again_name(s3_stub, payload)


def test_a_manual_payload_asks_for_tensorboard_uploads(s3_stub, sagemaker_stub):
    # Given the documented manual payload with `tensorboard: true`
    payload = {**load_event("manual_dataset.json"), "tensorboard": True}
    _version_listing(s3_stub, {"_SUCCESS": MARKER_ETAG})
    # When it is invoked in dry run
    request = _invoke(payload)["request"]
    # Then SageMaker uploads the scripts' TensorBoard folder while the job runs
    assert request["TensorBoardOutputConfig"]["LocalPath"] == "/opt/ml/output/tensorboard"
    assert request["TensorBoardOutputConfig"]["S3OutputPath"].endswith(f"/{request['TrainingJobName']}/tensorboard/")


@pytest.mark.parametrize(("payload_says", "uploads"), [(None, True), (False, False)])
def test_the_stacks_tensorboard_setting_is_the_default_a_payload_overrides(payload_says, uploads, s3_stub,
                                                                           sagemaker_stub, monkeypatch, tmp_path):
    # Given a stack deployed with `tensorboard: true`
    from training_trigger.settings import load_settings
    monkeypatch.setenv("STATIC_SETTINGS_FILE", write_stack_settings(tmp_path, tensorboard=True)["STATIC_SETTINGS_FILE"])
    load_settings.cache_clear()
    # When a manual payload that does not mention it, or turns it off, is invoked in dry run
    payload = load_event("manual_dataset.json")
    if payload_says is not None:
        payload["tensorboard"] = payload_says
    _version_listing(s3_stub, {"_SUCCESS": MARKER_ETAG})
    request = _invoke(payload)["request"]
    # Then the job uploads its TensorBoard logs unless the payload said not to
    assert ("TensorBoardOutputConfig" in request) is uploads


def _invoke_again_name(s3_stub, payload):
    _version_listing(s3_stub, {"_SUCCESS": MARKER_ETAG})
    return _invoke(payload)["job_name"]


def test_invalid_input_is_rejected_published_and_never_submitted(sns_stub, sagemaker_stub, capsys):
    # Given a manual payload that may not override the product's own hyperparameters
    payload = {"channels": {"train": "s3://ranker-data-example/datasets/news/v1/train/"},
               "hyperparameters": {"sagemaker_program": "other.py"}}
    sns_stub.add_response("publish", {"MessageId": "5b1e6f2c-0d8a-4d7e-9f1a-2b3c4d5e6f70"},
                          {"TopicArn": TOPIC_ARN, "Subject": ANY, "Message": ANY})
    # When it is invoked
    result = _invoke(payload)
    # Then it is rejected with the reason, counted, and nothing is started
    assert result["status"] == "rejected"
    assert any("sagemaker_program is set by the trigger itself" in error for error in result["errors"])
    assert '"JobsRejected"' in capsys.readouterr().out


def test_preflight_failure_is_rejected_with_the_job_name(s3_stub, sns_stub, sagemaker_stub):
    payload = {"dataset": "web search", "version": "2026-11-01", "distribution": "smdistributed",
               "instance_type": "ml.g5.48xlarge"}
    _version_listing(s3_stub, {"_SUCCESS": MARKER_ETAG})
    sns_stub.add_response("publish", {"MessageId": "5b1e6f2c-0d8a-4d7e-9f1a-2b3c4d5e6f70"},
                          {"TopicArn": TOPIC_ARN, "Subject": ANY, "Message": ANY})
    result = _invoke(payload)
    assert result["status"] == "rejected" and result["job_name"].startswith("ranker-web-search-")
    assert any("needs an SMDDP instance" in error for error in result["errors"])


def test_a_manual_job_name_outside_the_prefix_is_rejected(sns_stub, sagemaker_stub):
    sns_stub.add_response("publish", {"MessageId": "5b1e6f2c-0d8a-4d7e-9f1a-2b3c4d5e6f70"},
                          {"TopicArn": TOPIC_ARN, "Subject": ANY, "Message": ANY})
    payload = {**load_event("manual_channels.json"), "job_name": "adhoc-rerun"}
    result = _invoke(payload)
    assert result["status"] == "rejected"
    assert any("does not start with 'ranker-'" in error for error in result["errors"])


def test_a_version_without_marker_is_rejected_for_manual_runs(s3_stub, sns_stub, sagemaker_stub):
    _version_listing(s3_stub, {})
    sns_stub.add_response("publish", {"MessageId": "5b1e6f2c-0d8a-4d7e-9f1a-2b3c4d5e6f70"},
                          {"TopicArn": TOPIC_ARN, "Subject": ANY, "Message": ANY})
    result = _invoke({"dataset": "web search", "version": "2026-11-01"})
    assert result["status"] == "rejected" and "has no marker" in result["errors"][0]


def test_schedule_with_no_complete_version_is_ignored(s3_stub, sagemaker_stub):
    s3_stub.add_response("list_objects_v2", {"CommonPrefixes": []},
                         {"Bucket": DATA_BUCKET, "Prefix": "datasets/", "Delimiter": "/"})
    result = _invoke(load_event("schedule.json"))
    assert result["status"] == "ignored" and "no complete dataset version" in result["reason"]


def test_data_objects_are_ignored_without_any_call(sagemaker_stub):
    event = load_event("s3_eventbridge_object_created.json")
    event["detail"]["object"]["key"] = "datasets/web+search/2026-11-01/train/part-00000.txt"
    assert _invoke(event)["status"] == "ignored"


def _documented_payloads() -> list[dict]:
    page = (Path(__file__).resolve().parents[3] / "docs" / "trigger.md").read_text()
    # The page's <data-bucket> placeholder is what a reader replaces; as written it is no bucket name.
    page = page.replace("<data-bucket>", DATA_BUCKET)
    return [json.loads(match) for match in re.findall(r"--payload '(.*?)'", page, flags=re.DOTALL)]


def test_documented_payload_examples_run_as_written_in_dry_run(s3_stub, sagemaker_stub):
    # Given the payloads exactly as docs/trigger.md shows them
    payloads = _documented_payloads()
    assert len(payloads) == 2 and all(payload["dry_run"] for payload in payloads)
    # When each is invoked (dataset payloads list their version first)
    results = []
    for payload in payloads:
        if "dataset" in payload:
            _version_listing(s3_stub, {"_SUCCESS": MARKER_ETAG})
        results.append(_invoke(payload))
    # Then each returns its checked request and nothing starts
    assert [result["status"] for result in results] == ["dry_run", "dry_run"], results


def _manifest_version(s3_stub, manifest: dict) -> None:
    body = json.dumps(manifest).encode()
    _version_listing(s3_stub, {"manifest.json": "7b4ef1a3d1e26c2b5e0f3e9d7c1a8b42"})
    s3_stub.add_response("get_object", {"Body": StreamingBody(io.BytesIO(body), len(body))},
                         {"Bucket": DATA_BUCKET, "Key": VERSION_ROOT + "manifest.json"})


def _expect_rejection_notice(sns_stub) -> None:
    sns_stub.add_response("publish", {"MessageId": "5b1e6f2c-0d8a-4d7e-9f1a-2b3c4d5e6f70"},
                          {"TopicArn": TOPIC_ARN, "Subject": ANY, "Message": ANY})


@pytest.mark.parametrize(("hyperparameters", "message"), [
    ({"epoch": 2}, "hyperparameters.epoch is not a flag of the training scripts: did you mean ['epochs'"),
    ({"epochs": "ten"}, "hyperparameters.epochs='ten' is refused by --epochs: use a whole number"),
    ({"dropout": 1.5}, "hyperparameters.dropout=1.5 is refused by --dropout: use a number >= 0 and < 1"),
    ({"learning_rate": -1}, "hyperparameters.learning_rate=-1 is refused by --learning-rate: use a number > 0"),
    ({"loss": "lambdarank"}, "hyperparameters.loss='lambdarank' is refused by --loss: use one of pairwise, graded_listwise, listwise, pointwise"),
    ({"log1p": "maybe"}, "hyperparameters.log1p='maybe' is refused by --log1p: use true or false"),
])
def test_a_hyperparameter_the_project_scripts_refuse_is_refused_in_dry_run_before_any_call(
        hyperparameters, message, s3_stub, sns_stub, sagemaker_stub):
    # Given a dry-run payload for the project's own entry point with one hyperparameter its flags refuse
    payload = {**load_event("manual_dataset.json"), "hyperparameters": hyperparameters}
    _version_listing(s3_stub, {"_SUCCESS": MARKER_ETAG})
    _expect_rejection_notice(sns_stub)
    # When it is invoked (the SageMaker Stubber has nothing queued: any call would fail the test)
    result = _invoke(payload)
    # Then it is rejected, naming the field, the value and what the script accepts
    assert result["status"] == "rejected"
    assert any(message in error for error in result["errors"]), result["errors"]


def test_a_manifest_hyperparameter_typo_is_refused_before_any_call(s3_stub, sns_stub, sagemaker_stub):
    # Given a version whose manifest.json misspells a flag, and its marker event
    _manifest_version(s3_stub, {"training": {"hyperparameters": {"epoch": 2}}})
    _expect_rejection_notice(sns_stub)
    # When the event arrives / Then no job starts and the flag is named with its likely spelling
    result = _invoke(load_event("s3_notification_put.json"))
    assert result["status"] == "rejected"
    assert result["errors"] == ["hyperparameters.epoch is not a flag of the training scripts: did you mean "
                                "['epochs']?"]


@pytest.mark.parametrize("misspelt", ["trainig", "Training", "job", "settings"])
def test_a_misspelt_manifest_training_key_is_refused_instead_of_a_default_job(misspelt, s3_stub, sns_stub,
                                                                              sagemaker_stub):
    # Given a manifest.json whose job settings sit under a key other than `training` (a typo or a guess)
    _manifest_version(s3_stub, {"created_by": "ltr-export nightly", misspelt: {"instance_count": 2}})
    _expect_rejection_notice(sns_stub)
    # When its marker event arrives
    result = _invoke(load_event("s3_notification_put.json"))
    # Then nothing starts, and the key is named with the fix
    assert result["status"] == "rejected"
    assert len(result["errors"]) == 1 and f"manifest.json {misspelt} looks like a misspelt 'training'" in \
        result["errors"][0]


def test_free_metadata_beside_training_is_still_accepted(s3_stub, sagemaker_stub, sent_requests):
    # Given the documented manifest: metadata keys beside `training`
    _manifest_version(s3_stub, {"created_by": "ltr-export nightly", "rows": {"train": 723412},
                                "training": {"hyperparameters": {"epochs": 3}}})
    sagemaker_stub.add_response("create_training_job", {"TrainingJobArn": "arn:aws:sagemaker:eu-west-1:"
                                                        "123456789012:training-job/ranker-x"})
    # When its marker event arrives / Then the job starts with the manifest's settings
    assert _invoke(load_event("s3_notification_put.json"))["status"] == "started"
    assert sent_requests[0]["HyperParameters"]["epochs"] == "3"


def test_a_foreign_scripts_hyperparameters_pass_through_untouched(s3_stub, sagemaker_stub, monkeypatch, tmp_path):
    # Given a stack built on a user's source_dir (no flag definitions) and hyperparameters the ranker has no flag for
    from training_trigger.settings import load_settings

    environ = write_stack_settings(tmp_path, bundle_files=["train.py", "sagemaker_distributed/__init__.py"],
                                   default_entry_point="train.py", checked_entry_points=[], training_flags={},
                                   default_hyperparameters={})
    monkeypatch.setenv("STATIC_SETTINGS_FILE", environ["STATIC_SETTINGS_FILE"])
    load_settings.cache_clear()
    payload = {"dataset": "web search", "version": "2026-11-01", "distribution": "none",
               "instance_type": "ml.g5.2xlarge", "hyperparameters": {"lr": "1e-4", "optimizer": "sgd", "epoch": 2},
               "dry_run": True}
    _version_listing(s3_stub, {"_SUCCESS": MARKER_ETAG})
    # When it is invoked in dry run
    result = _invoke(payload)
    # Then the request carries them as SageMaker's SDK encodes them, and the user's script as the program
    assert result["status"] == "dry_run", result
    hyperparameters = result["request"]["HyperParameters"]
    assert (hyperparameters["lr"], hyperparameters["optimizer"], hyperparameters["epoch"]) == ('"1e-4"', '"sgd"', "2")
    assert hyperparameters["sagemaker_program"] == '"train.py"'


def test_an_entry_point_outside_the_bundle_is_refused_before_any_call(s3_stub, sns_stub, sagemaker_stub):
    # Given a manifest naming a script the bundle does not hold
    _manifest_version(s3_stub, {"training": {"entry_point": "scripts/train.py"}})
    _expect_rejection_notice(sns_stub)
    # When its marker event arrives / Then nothing starts, and the scripts the bundle has are named
    result = _invoke(load_event("s3_notification_put.json"))
    assert result["status"] == "rejected"
    assert "training.entry_point='scripts/train.py' is not a file of the training code bundle" in result["errors"][0]
    assert "['train_ddp.py', 'train_lightning.py']" in result["errors"][0]
