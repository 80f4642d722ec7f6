"""The synthesized app: stack protection, the trigger's environment contract, snapshots, pinned logical IDs."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from stacks.trigger_environment import metric_definitions

from .synthesis import SynthesizedApp, resources_of_type, trigger_function

SNAPSHOT_DIR = Path(__file__).parent / "snapshots"
UPDATE_SWITCH = "UPDATE_SNAPSHOTS"
CONTRACT_KEYS = {
    "DATA_BUCKET", "ARTIFACTS_BUCKET", "DATASET_PREFIX", "MARKER_NAMES", "JOB_NAME_PREFIX", "ROLE_ARN",
    "TRAINING_IMAGE_URI", "IMAGE_SOURCE", "FRAMEWORK_VERSION", "PYTHON_VERSION", "SOURCE_BUNDLE_URI",
    "OUTPUT_S3_URI", "CHECKPOINT_S3_URI", "DEFAULT_ENTRY_POINT", "DEFAULT_DISTRIBUTION", "DEFAULT_INSTANCE_TYPE",
    "DEFAULT_INSTANCE_COUNT", "MAX_INSTANCE_COUNT", "MAX_RUNTIME_CEILING_SECONDS", "EXTRA_DATA_BUCKETS",
    "DEFAULT_HYPERPARAMETERS", "INPUT_MODE", "VOLUME_SIZE_GB", "MAX_RUNTIME_SECONDS",
    "USE_SPOT", "MAX_WAIT_SECONDS", "KEEP_ALIVE_SECONDS", "JOB_RETRY_ATTEMPTS", "SUBNET_IDS", "SECURITY_GROUP_IDS",
    "KMS_KEY_ARN", "ENABLE_NETWORK_ISOLATION", "ENABLE_INTER_CONTAINER_ENCRYPTION", "METRIC_DEFINITIONS",
    "CONTAINER_LOG_LEVEL", "NOTIFICATION_TOPIC_ARN", "POWERTOOLS_SERVICE_NAME", "POWERTOOLS_METRICS_NAMESPACE",
    "POWERTOOLS_LOG_LEVEL",
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
    for app, policy in ((dev_app, "Delete"), (prod_app, "Retain")):
        for resource in resources_of_type(app.stateful, "AWS::S3::Bucket").values():
            assert resource["DeletionPolicy"] == policy


def test_trigger_environment_is_exactly_the_contract(any_app: SynthesizedApp) -> None:
    environment = _environment(any_app)
    assert set(environment) == CONTRACT_KEYS
    config = any_app.config
    assert environment["JOB_NAME_PREFIX"] == config.project_prefix
    assert environment["MARKER_NAMES"] == ",".join(config.marker_names)
    assert json.loads(environment["METRIC_DEFINITIONS"]) == metric_definitions()
    assert json.loads(environment["DEFAULT_HYPERPARAMETERS"]) == config.default_hyperparameters
    assert environment["USE_SPOT"] == ("true" if config.use_spot else "false")
    assert environment["DEFAULT_INSTANCE_COUNT"] == str(config.instance_count)


def test_image_is_the_regions_pytorch_dlc_and_source_is_the_bundle_asset(dev_app: SynthesizedApp) -> None:
    environment = _environment(dev_app)
    config = dev_app.config
    assert re.fullmatch(rf"\d{{12}}\.dkr\.ecr\.{config.region}\.amazonaws\.com/pytorch-training:"
                        rf"{config.framework_version}-gpu-{config.python_version}", environment["TRAINING_IMAGE_URI"])
    bundle = json.dumps(environment["SOURCE_BUNDLE_URI"])
    assert re.search(r"s3://cdk-[a-z0-9]+-assets-\$\{AWS::AccountId\}-us-east-1/[0-9a-f]{64}\.gz", bundle)


def test_metric_definitions_come_from_the_training_codes_log_format() -> None:
    from ranker import log_format  # the training code's own module, as the training scripts import it

    assert metric_definitions() == log_format.metric_definitions()


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
