"""The synthesized app: stack protection, the trigger's environment contract, snapshots, pinned logical IDs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from job_watchdog.metric_names import JOBS_UNCHECKED

from .synthesis import (
    SynthesizedApp,
    config_for,
    function_of_service,
    resources_of_type,
    synthesize,
    synthesized_static_settings,
    trigger_function,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "training"))  # the training tests' launch helpers
from training_launch import TINY_MODEL_FLAGS, run_dirs, run_script, script_env  # noqa: E402

SNAPSHOT_DIR = Path(__file__).parent / "snapshots"
UPDATE_SWITCH = "UPDATE_SNAPSHOTS"
# Only what deployment resolves, and what Powertools reads at import, lives in the environment (Lambda's 4 KB limit).
CONTRACT_KEYS = {
    "DATA_BUCKET", "ARTIFACTS_BUCKET", "ROLE_ARN", "TRAINING_IMAGE_URI", "SOURCE_BUNDLE_URI", "OUTPUT_S3_URI",
    "CHECKPOINT_S3_URI", "KMS_KEY_ARN", "NOTIFICATION_TOPIC_ARN", "STATIC_SETTINGS_FILE", "POWERTOOLS_SERVICE_NAME",
    "POWERTOOLS_METRICS_NAMESPACE", "POWERTOOLS_LOG_LEVEL",
}
# Replacing these would delete data or keys: their logical IDs must never change.
STATEFUL_LOGICAL_IDS = {
    "AWS::KMS::Key": {"EncryptionKey3A692D6E"},
    "AWS::S3::Bucket": {"BucketsAccessLogBucket0E24AD7A", "BucketsTrainingDataBucketAD16147F",
                        "BucketsArtifactsBucket49D84E1D"},
    "AWS::ECR::Repository": {"ImageRepositoryTrainingImageRepositoryE5CAA42A"},
}


def _environment(app: SynthesizedApp) -> dict[str, Any]:
    return trigger_function(app.stateless)["Properties"]["Environment"]["Variables"]


def test_only_prod_stateful_stack_is_termination_protected_and_retained(dev_app: SynthesizedApp,
                                                                         prod_app: SynthesizedApp) -> None:
    manifest = {env: json.loads((app.out_dir / "manifest.json").read_text())
                for env, app in (("dev", dev_app), ("prod", prod_app))}
    protected = {env: sorted(name for name, artifact in stacks["artifacts"].items()
                             if artifact.get("properties", {}).get("terminationProtection"))
                 for env, stacks in manifest.items()}
    assert protected == {"dev": [], "prod": ["ranker-prod-stateful"]}
    # The access-log bucket outlives both (tests/infrastructure/test_stateful_retention.py says why).
    for app, policy in ((dev_app, "Delete"), (prod_app, "Retain")):
        for logical_id, resource in resources_of_type(app.stateful, "AWS::S3::Bucket").items():
            assert resource["DeletionPolicy"] == ("Retain" if "AccessLog" in logical_id else policy), logical_id


def test_trigger_environment_is_exactly_the_contract(any_app: SynthesizedApp) -> None:
    assert set(_environment(any_app)) == CONTRACT_KEYS


def test_the_bundle_carries_the_settings_synthesis_fixes(any_app: SynthesizedApp) -> None:
    # Given the settings file in the synthesized trigger's bundle
    static = synthesized_static_settings(any_app)
    config = any_app.config
    # Then it holds the configuration, typed, and the job bundle's own file list
    assert static["job_name_prefix"] == config.project_prefix
    assert static["marker_names"] == list(config.marker_names)
    assert static["default_hyperparameters"] == config.default_hyperparameters
    assert static["use_spot"] is config.use_spot
    assert static["default_instance_count"] == config.instance_count
    assert {"train_ddp.py", "train_lightning.py", "ranker/config.py", "requirements.txt"} <= set(static["bundle_files"])
    assert static["default_entry_point"] in static["bundle_files"]
    # And the project's entry points are checked against the training code's own flags
    assert static["checked_entry_points"] == ["train_ddp.py", "train_lightning.py"]
    assert static["training_flags"]["flags"]["dropout"].items() >= {"type": "float", "minimum": 0, "below": 1,
                                                                    "use": "a number >= 0 and < 1"}.items()
    # (and their defaults: a Hyperband search without epochs trains at most --epochs' default)
    assert isinstance(static["training_flags"]["flags"]["epochs"]["default"], int)


def test_trigger_reserves_no_concurrency_by_default(any_app: SynthesizedApp) -> None:
    # Given cdk.json's environments as committed / When they are synthesized
    properties = trigger_function(any_app.stateless)["Properties"]
    # Then the trigger draws on the account's unreserved pool: Lambda keeps 100 of an account's concurrency
    # unreserved, so any reservation fails to deploy where the account's quota is low (new accounts)
    assert "ReservedConcurrentExecutions" not in properties


def test_pipeline_outputs_name_the_trigger_function_and_the_topic(any_app: SynthesizedApp) -> None:
    # Given the synthesized pipeline stack
    template = any_app.stateless
    trigger = trigger_function(template)
    [function_id] = [logical_id for logical_id, function in resources_of_type(template, "AWS::Lambda::Function").items()
                     if function is trigger]
    [topic_id] = resources_of_type(template, "AWS::SNS::Topic")
    prefix = f"{any_app.config.project_prefix}-{any_app.config.env_name}"
    # When its outputs are read / Then they give what `aws lambda invoke` and a subscriber need, exported by name
    assert template["Outputs"] == {
        "TriggerFunctionName": {"Value": {"Ref": function_id}, "Export": {"Name": f"{prefix}-TriggerFunctionName"}},
        "NotificationTopicArn": {"Value": {"Ref": topic_id}, "Export": {"Name": f"{prefix}-NotificationTopicArn"}},
    }


def test_image_is_the_regions_pytorch_dlc_and_source_is_the_bundle_asset(dev_app: SynthesizedApp) -> None:
    environment = _environment(dev_app)
    config = dev_app.config
    assert re.fullmatch(rf"\d{{12}}\.dkr\.ecr\.{config.region}\.amazonaws\.com/pytorch-training:"
                        rf"{config.framework_version}-gpu-{config.python_version}", environment["TRAINING_IMAGE_URI"])
    bundle = json.dumps(environment["SOURCE_BUNDLE_URI"])
    assert re.search(r"s3://cdk-[a-z0-9]+-assets-\$\{AWS::AccountId\}-us-east-1/[0-9a-f]{64}\.gz", bundle)


# Log lines as the training scripts print them (`name=value`, space separated), written out by hand, with what
# SageMaker must read from each: the synthesized `MetricDefinitions` are checked against these, not against the
# function that built them.
EXPECTED_CAPTURES = {
    "epoch=1 step=20 train_loss=0.418237 learning_rate=0.000912 samples_per_second=15234.5":
        {"epoch": 1, "step": 20, "train_loss": 0.418237, "learning_rate": 0.000912, "samples_per_second": 15234.5},
    "epoch=3 step=400 train_loss=0.0371 learning_rate=1.5e-05 samples_per_second=1.04e+07":
        {"epoch": 3, "step": 400, "train_loss": 0.0371, "learning_rate": 1.5e-05, "samples_per_second": 1.04e7},
    "epoch=2 step=40 val_loss=0.391 val_ndcg@1=0.61 val_ndcg@3=0.64 val_ndcg@5=0.66 val_ndcg@10=0.7":
        {"epoch": 2, "step": 40, "val_loss": 0.391, "val_ndcg@1": 0.61, "val_ndcg@3": 0.64, "val_ndcg@5": 0.66,
         "val_ndcg@10": 0.7},
    "train_loss=0.38 val_loss=0.4 val_ndcg@10=0.761 test_ndcg@1=0.5 test_ndcg@3=0.55 test_ndcg@5=0.6 "
    "test_ndcg@10=0.65":
        {"train_loss": 0.38, "val_loss": 0.4, "val_ndcg@10": 0.761, "test_ndcg@1": 0.5, "test_ndcg@3": 0.55,
         "test_ndcg@5": 0.6, "test_ndcg@10": 0.65},
    # A diverged loss prints as `nan`: SageMaker records no point rather than a wrong one.
    "epoch=1 step=30 train_loss=nan learning_rate=0.001": {"epoch": 1, "step": 30, "learning_rate": 0.001},
    "resumed from /opt/ml/checkpoints/step-000000200.pt at step 200": {},
}


def _captures(definitions: list[dict[str, str]], line: str) -> dict[str, float]:
    """What SageMaker records from one log line: each definition's first group, where its regex matches."""
    found = {}
    for definition in definitions:
        match = re.search(definition["Regex"], line)
        if match:
            found[definition["Name"]] = float(match.group(1))
    return found


def test_metric_definitions_read_each_metric_from_the_lines_training_prints(any_app: SynthesizedApp) -> None:
    # Given the MetricDefinitions the synthesized trigger sends with every job
    definitions = synthesized_static_settings(any_app)["metric_definitions"]
    # Then exactly the metrics the scripts print are defined, and each regex reads its own value and no other
    assert {definition["Name"] for definition in definitions} == set().union(*EXPECTED_CAPTURES.values())
    for line, expected in EXPECTED_CAPTURES.items():
        assert _captures(definitions, line) == pytest.approx(expected), line


def _metric_lines(output: str) -> list[str]:
    """Lines made only of `name=value` tokens: the metric reports, whatever else the script logs."""
    return [line for line in output.splitlines() if line.split() and all("=" in token for token in line.split())]


@pytest.mark.slow  # one real training run per entry point: seconds each
@pytest.mark.parametrize("script", ["train_ddp.py", "train_lightning.py"])
def test_metric_definitions_capture_every_metric_a_real_training_run_prints(dev_app: SynthesizedApp, script: str,
                                                                           tmp_path: Path) -> None:
    # Given a tiny LETOR dataset and the synthesized MetricDefinitions
    definitions = synthesized_static_settings(dev_app)["metric_definitions"]
    data = tmp_path / "data"
    subprocess.run([sys.executable, "-m", "ranker.data.synthetic", "--output", str(data), "--queries", "48",
                    "--docs-per-query", "8", "--features", "12"], env=script_env(), check=True, capture_output=True)
    # When the entry point trains one epoch with a test channel, as a job does
    result = run_script(script, ["--train", str(data), "--test", str(data), "--epochs", "1", *TINY_MODEL_FLAGS,
                                 "--log-every", "2", *run_dirs(tmp_path).flags()])
    # Then every metric it prints is defined, and every definition reads a value from what it printed
    lines = _metric_lines(result.stdout)
    printed = {token.split("=", 1)[0] for line in lines for token in line.split()}
    captured = {name for line in lines for name in _captures(definitions, line)}
    assert printed == captured == {definition["Name"] for definition in definitions}, result.stdout[-2000:]


def test_stateful_logical_ids_never_change(any_app: SynthesizedApp) -> None:
    for resource_type, logical_ids in STATEFUL_LOGICAL_IDS.items():
        assert set(resources_of_type(any_app.stateful, resource_type)) == logical_ids, (
            f"{resource_type} logical IDs changed: CloudFormation would replace (delete) these resources")


def _normalised(template: dict[str, Any]) -> str:
    text = json.dumps(template, indent=1, sort_keys=True)
    return re.sub(r"[0-9a-f]{64}", "<asset-hash>", text) + "\n"


def test_templates_match_their_snapshots(any_app: SynthesizedApp) -> None:
    for stack_name, template in any_app.templates.items():
        snapshot = SNAPSHOT_DIR / f"{stack_name}.json"
        current = _normalised(template)
        if os.environ.get(UPDATE_SWITCH) == "1":
            snapshot.parent.mkdir(exist_ok=True)
            snapshot.write_text(current)
        assert snapshot.exists(), f"no snapshot for {stack_name}: run with {UPDATE_SWITCH}=1 to create it"
        if snapshot.read_text() != current:
            pytest.fail(f"{stack_name} differs from {snapshot}: review the change with `git diff` after running "
                        f"`{UPDATE_SWITCH}=1 .venv/bin/python -m pytest tests/infrastructure/test_stacks.py`")


def test_every_dead_letter_queue_has_an_alarm_that_notifies_the_topic(any_app: SynthesizedApp) -> None:
    # Given the pipeline stack's queues (each Lambda's dead-letter queue) and its notification topic
    template = any_app.stateless
    queues = set(resources_of_type(template, "AWS::SQS::Queue"))
    topic, = resources_of_type(template, "AWS::SNS::Topic")
    # When the alarms on queue depth are read
    alarmed = {}
    for alarm in resources_of_type(template, "AWS::CloudWatch::Alarm").values():
        properties = alarm["Properties"]
        if properties.get("MetricName") == "ApproximateNumberOfMessagesVisible":
            queue = properties["Dimensions"][0]["Value"]["Fn::GetAtt"][0]
            alarmed[queue] = properties["AlarmActions"]
    # Then each queue (the trigger's, the registrar's and the watchdog's) pages the topic when one event lands in it
    assert set(alarmed) == queues and len(queues) == 3
    assert all(actions == [{"Ref": topic}] for actions in alarmed.values())


def test_the_watchdog_is_deployed_with_the_configured_timing(any_app: SynthesizedApp) -> None:
    function = function_of_service(any_app.stateless, "stalled-job-watchdog")
    assert function["Properties"]["Environment"]["Variables"]["STALL_SECONDS"] == "3600"  # stall_minutes: 60
    schedules = [rule["Properties"]["ScheduleExpression"]
                 for rule in resources_of_type(any_app.stateless, "AWS::Events::Rule").values()
                 if "ScheduleExpression" in rule["Properties"]]
    assert "rate(10 minutes)" in schedules  # stall_check_minutes: 10


def test_jobs_the_watchdog_could_not_check_page_the_topic_once_not_on_every_sweep(any_app: SynthesizedApp) -> None:
    # Given the watchdog function (Powertools puts its metrics in POWERTOOLS_METRICS_NAMESPACE, with a `service`
    # dimension of POWERTOOLS_SERVICE_NAME) and the topic
    variables = function_of_service(any_app.stateless, "stalled-job-watchdog")["Properties"]["Environment"][
        "Variables"]
    topic, = resources_of_type(any_app.stateless, "AWS::SNS::Topic")
    # When the alarms on what its sweeps put out are read
    alarms = [alarm["Properties"] for alarm in resources_of_type(any_app.stateless, "AWS::CloudWatch::Alarm").values()
              if alarm["Properties"].get("MetricName") == JOBS_UNCHECKED]
    # Then one alarm watches the sweeps' count of unchecked jobs, where the function puts it
    [alarm] = alarms
    assert (alarm["Namespace"], alarm["Dimensions"]) == (
        variables["POWERTOOLS_METRICS_NAMESPACE"], [{"Name": "service", "Value": variables["POWERTOOLS_SERVICE_NAME"]}])
    # and enters ALARM on the first sweep that leaves a job unchecked, one sweep period at a time
    assert (alarm["Statistic"], alarm["Period"], alarm["Threshold"], alarm["EvaluationPeriods"]) == (
        "Maximum", any_app.config.stall_check_minutes * 60, 1, 1)
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    # and tells the topic on that transition only (CloudWatch acts on state transitions; no OK action), keeping its
    # state through a period without a sweep rather than passing through OK and telling the topic again
    assert alarm["AlarmActions"] == [{"Ref": topic}] and "OKActions" not in alarm
    assert alarm["TreatMissingData"] == "ignore"


@pytest.mark.slow
def test_without_the_watchdog_no_function_schedule_or_alarm_of_it_is_deployed(tmp_path: Path) -> None:
    # Given the watchdog turned off (-c stall_watchdog=false) / When the app is synthesized (cdk-nag included)
    app = synthesize(config_for("dev", stall_watchdog=False), tmp_path)
    # Then the pipeline has the trigger's and registrar's functions and queues only, and no schedule
    services = {resource["Properties"].get("Environment", {}).get("Variables", {}).get("POWERTOOLS_SERVICE_NAME")
                for resource in resources_of_type(app.stateless, "AWS::Lambda::Function").values()}
    assert "stalled-job-watchdog" not in services and {"training-trigger", "model-registration"} <= services
    assert len(resources_of_type(app.stateless, "AWS::SQS::Queue")) == 2
    assert not any("ScheduleExpression" in rule["Properties"]
                   for rule in resources_of_type(app.stateless, "AWS::Events::Rule").values())
    assert not any(alarm["Properties"].get("MetricName") == JOBS_UNCHECKED
                   for alarm in resources_of_type(app.stateless, "AWS::CloudWatch::Alarm").values())
