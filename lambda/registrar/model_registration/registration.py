"""From a completed training job to the Model Registry requests that register its model. Pure: no AWS calls.

The job's dataset comes from the provenance tags the trigger puts on every job it starts from a dataset; its
metrics from DescribeTrainingJob's FinalMetricDataList (the last value each MetricDefinitions regex captured, which
is the final evaluation line the training scripts print, the numbers metrics.json also holds).
"""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from model_registration.settings import Serving, Settings, Threshold
from model_registration.tuning import TuningOutcome

# The trigger's provenance tag keys (training_trigger.overrides.TRIGGER_TAG_KEYS; a unit test holds them equal).
DATASET_TAG, DATASET_VERSION_TAG = "dataset", "dataset-version"
APPROVAL_STATUS = "PendingManualApproval"
ARTIFACT_NAME = "model.tar.gz"
# Written beside the job's model.tar.gz: ModelMetrics points at documents in S3, never at inline values.
QUALITY_REPORT_NAME = "model_quality.json"
QUALITY_REPORT_KEY = "ranking_metrics"
GROUP_NAME_LENGTH = 63
CLIENT_TOKEN_LENGTH = 32  # CreateModelPackage allows 36
# What the SDK's PyTorchModel sends for a model whose code is inside the artifact: the inference toolkit imports
# SAGEMAKER_PROGRAM from model.tar.gz's code/ (every job writes code/inference.py there), which SageMaker unpacks
# into /opt/ml/model.
# CreateModelPackage's CustomerMetadataProperties: values of letters, separators, digits and these symbols, at most
# 256 characters (botocore's CustomerMetadataValue).
METADATA_SYMBOLS = "_.:/=+-@"
METADATA_VALUE_LENGTH = 256
# What a tracked job's MLflow run is recorded under in its package (docs/experiment-tracking.md).
MLFLOW_METADATA_KEYS = {"resource": "mlflow-resource-arn", "experiment": "mlflow-experiment",
                        "experiment_id": "mlflow-experiment-id", "run_name": "mlflow-run-name",
                        "run_id": "mlflow-run-id"}
SERVING_ENVIRONMENT = {"SAGEMAKER_PROGRAM": "inference.py", "SAGEMAKER_SUBMIT_DIRECTORY": "/opt/ml/model/code",
                       "SAGEMAKER_CONTAINER_LOG_LEVEL": "20"}
# That handler as a member of model.tar.gz: a package whose artifact lacks it could not be served.
SERVING_HANDLER_MEMBER = "code/" + SERVING_ENVIRONMENT["SAGEMAKER_PROGRAM"]


@dataclass(frozen=True)
class Registration:
    """What to send: the group (created on first use), the quality report to store, the package to create."""

    job_name: str
    artifact: str  # the model.tar.gz URI, which must hold SERVING_HANDLER_MEMBER
    group_name: str
    group_description: str
    metrics: dict[str, float]
    quality_report_uri: str
    quality_report: dict[str, Any]
    package_request: dict[str, Any]


@dataclass(frozen=True)
class Refusal:
    """A completed job whose model is not registered, and why (the notification says it)."""

    job_name: str
    reason: str


def plan_registration(description: Mapping[str, Any], tags: Mapping[str, str], settings: Settings,
                      tuning: TuningOutcome | None = None) -> Registration | Refusal:
    """The requests that register the job's model; with `tuning`, the job is that tuning job's best trial."""
    job_name = description["TrainingJobName"]
    dataset = tags.get(DATASET_TAG)
    if not dataset:
        return Refusal(job_name, f"the job has no {DATASET_TAG!r} tag (it was started with explicit channels, not "
                                 f"from a dataset), so it belongs to no model package group; register it by hand")
    artifact = description.get("ModelArtifacts", {}).get("S3ModelArtifacts", "")
    if not artifact.endswith(f"/{ARTIFACT_NAME}"):
        return Refusal(job_name, f"ModelArtifacts.S3ModelArtifacts={artifact!r} is not a {ARTIFACT_NAME}: the job "
                                 f"left no model to register")
    metrics = quality_metrics(description, settings.quality_metrics)
    if settings.threshold:
        below = threshold_failure(metrics, settings.threshold)
        if below:
            return Refusal(job_name, below)
    version = tags.get(DATASET_VERSION_TAG, "")
    group_name = model_package_group_name(settings.project_prefix, dataset)
    report_uri = artifact.removesuffix(ARTIFACT_NAME) + QUALITY_REPORT_NAME
    return Registration(
        job_name=job_name,
        artifact=artifact,
        group_name=group_name,
        group_description=f"Ranking models trained on dataset {dataset!r} by {settings.project_prefix} jobs",
        metrics=metrics,
        quality_report_uri=report_uri,
        quality_report=quality_report(metrics),
        package_request=model_package_request(description, group_name=group_name, report_uri=report_uri,
                                              dataset=dataset, version=version, serving=settings.serving,
                                              tuning=tuning),
    )


def unservable_reason(artifact: str) -> str:
    """Why a job whose artifact lacks the serving handler is not registered, and what makes its model servable."""
    return (f"{artifact} holds no {SERVING_HANDLER_MEMBER}, the handler (model_fn, input_fn, predict_fn, output_fn) that "
            f"the package's PyTorch inference container imports (SAGEMAKER_PROGRAM="
            f"{SERVING_ENVIRONMENT['SAGEMAKER_PROGRAM']}), so the model could not be served: have the training script "
            f"write its handler to $SM_MODEL_DIR/{SERVING_HANDLER_MEMBER} (docs/bring-your-own.md, Serving your model)")


def unchecked_handler_note(artifact: str) -> str:
    """Said of a model registered before its archive could be read to the end in the function's time."""
    return (f"{artifact} was too large to read for {SERVING_HANDLER_MEMBER} before the function's timeout: registered "
            f"unchecked; a version without the handler cannot be served (docs/model-registry.md)")


def quality_metrics(description: Mapping[str, Any], names: tuple[str, ...]) -> dict[str, float]:
    """The job's final value of each metric in `names` that it reported."""
    final = {metric["MetricName"]: float(metric["Value"]) for metric in description.get("FinalMetricDataList", [])}
    return {name: final[name] for name in names if name in final}


def threshold_failure(metrics: Mapping[str, float], threshold: Threshold) -> str | None:
    """Why the model misses the threshold, or None when it meets it."""
    value = metrics.get(threshold.metric)
    if value is None:
        return (f"the job reported no {threshold.metric} (its quality metrics: {sorted(metrics)}), so the "
                f"registration threshold {threshold.metric} >= {threshold.minimum} cannot be checked")
    if math.isnan(value) or value < threshold.minimum:
        return (f"{threshold.metric}={value:.4f} is below the registration threshold {threshold.minimum} "
                f"(registration_threshold in the stack's configuration)")
    return None


def model_package_group_name(project_prefix: str, dataset: str) -> str:
    """`<prefix>-<dataset>`, the dataset's runs of other characters as one hyphen: the name SageMaker allows."""
    slug = re.sub(r"[^A-Za-z0-9]+", "-", dataset).strip("-")
    return f"{project_prefix}-{slug}"[:GROUP_NAME_LENGTH].rstrip("-")


def mlflow_run(description: Mapping[str, Any]) -> dict[str, str]:
    """The job's MLflow run as package metadata: from its MlflowConfig and the MlflowDetails SageMaker reports, or
    for a tuning job's trial (whose definition has no MlflowConfig) from the MLflow variables the trigger gave it,
    the run named after the trial. Values CreateModelPackage would refuse are left out rather than failing it."""
    config, details = description.get("MlflowConfig") or {}, description.get("MlflowDetails") or {}
    environment = description.get("Environment") or {}
    if config.get("MlflowResourceArn"):
        run = {"resource": config["MlflowResourceArn"], "experiment": config.get("MlflowExperimentName", ""),
               "run_name": config.get("MlflowRunName") or description["TrainingJobName"],
               "experiment_id": details.get("MlflowExperimentId", ""), "run_id": details.get("MlflowRunId", "")}
    elif environment.get("MLFLOW_TRACKING_URI", "").startswith("arn:"):
        run = {"resource": environment["MLFLOW_TRACKING_URI"],
               "experiment": environment.get("MLFLOW_EXPERIMENT_NAME", ""),
               "run_name": description["TrainingJobName"]}
    else:
        return {}
    return {MLFLOW_METADATA_KEYS[field]: value for field, value in run.items() if _is_metadata_value(value)}


def _is_metadata_value(value: str) -> bool:
    return 0 < len(value) <= METADATA_VALUE_LENGTH and all(
        unicodedata.category(char)[0] in "LZN" or char in METADATA_SYMBOLS for char in value)


def quality_report(metrics: Mapping[str, float]) -> dict[str, Any]:
    """The ModelQuality statistics document, one `{"value": ...}` per metric as Model Monitor's reports hold them."""
    return {QUALITY_REPORT_KEY: {name: {"value": value} for name, value in metrics.items()}}


def inference_specification(model_data_url: str, serving: Serving) -> dict[str, Any]:
    """The package's container: the PyTorch inference image (the training image has no model server) running the
    artifact's own handler, as the SDK's `PyTorchModel(...).register(...)` describes it."""
    return {
        "Containers": [{
            "Image": serving.image_uri,
            "Environment": {**SERVING_ENVIRONMENT, "SAGEMAKER_REGION": serving.region},
            "ModelDataUrl": model_data_url,
            "Framework": "PYTORCH",
            "FrameworkVersion": serving.framework_version,
        }],
        "SupportedRealtimeInferenceInstanceTypes": [serving.instance_type],
        "SupportedTransformInstanceTypes": [serving.instance_type],
    }


def model_package_request(description: Mapping[str, Any], *, group_name: str, report_uri: str, dataset: str,
                          version: str, serving: Serving, tuning: TuningOutcome | None = None) -> dict[str, Any]:
    """The keyword arguments of `sagemaker.create_model_package(**request)`: a version of `group_name`; a tuning
    job's winner also names its tuning job and objective value."""
    job_name, job_arn = description["TrainingJobName"], description["TrainingJobArn"]
    provenance = {"training-job": job_name, DATASET_TAG: dataset}
    if version:
        provenance[DATASET_VERSION_TAG] = version
    provenance |= mlflow_run(description)
    summary = f"Trained by {job_name} on {dataset} {version}".strip()
    if tuning is not None:
        provenance |= {"tuning-job": tuning.tuning_job, "tuning-objective-metric": tuning.objective_metric,
                       "tuning-objective-value": repr(tuning.objective_value)}
        summary += f", {tuning.note()}"
    return {
        "ModelPackageGroupName": group_name,
        "ModelPackageDescription": summary[:1024],
        "InferenceSpecification": inference_specification(description["ModelArtifacts"]["S3ModelArtifacts"],
                                                          serving),
        "ModelMetrics": {"ModelQuality": {"Statistics": {"ContentType": "application/json", "S3Uri": report_uri}}},
        "MetadataProperties": {"GeneratedBy": job_arn},
        "CustomerMetadataProperties": provenance,
        "ModelApprovalStatus": APPROVAL_STATUS,
        # The same job always sends the same token: a second delivery of its event creates no second version.
        "ClientToken": hashlib.sha256(job_arn.encode()).hexdigest()[:CLIENT_TOKEN_LENGTH],
    }
