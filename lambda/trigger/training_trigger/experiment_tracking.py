"""Experiment tracking in SageMaker managed MLflow: the tracking server or MLflow app a job logs to, its experiment
and run, and what the job's request carries for them.

SageMaker takes `MlflowConfig` (CreateTrainingJob: `MlflowResourceArn`, `MlflowExperimentName`, `MlflowRunName`) and
reports the run it used in DescribeTrainingJob's `MlflowDetails`. AWS documents no environment it gives a script of
one's own for it, so the job's environment also carries MLflow's own variables with the same values
(`MLFLOW_TRACKING_URI` = the ARN, which the sagemaker-mlflow plugin resolves; `MLFLOW_EXPERIMENT_NAME`), and the
job's S3 output path for the model's location (`MODEL_S3_OUTPUT_PATH`): any MLflow client in the job, the project's entry points or a user's script, logs to that experiment without further settings,
and names its run after the job (`TRAINING_JOB_NAME`, which SageMaker sets in every container), the run name
`MlflowConfig` gives. A tuning job's training definition has no `MlflowConfig` (botocore's
HyperParameterTrainingJobDefinition): its trials get the variables alone, one run per trial.

Standard library only: synthesis loads this file alone (stacks/trigger_modules.py) to check `mlflow_resource_arn`
by the rule the trigger applies.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# SageMaker's managed MLflow resources (AWS API reference, AIMlflowConfig: `mlflow-(app|tracking-server)/.*`);
# botocore's MlflowConfig pattern allows any `mlflow-[a-zA-Z-]*/` type.
RESOURCE_TYPES = ("mlflow-tracking-server", "mlflow-app")
TRACKING_URI_VARIABLE = "MLFLOW_TRACKING_URI"
EXPERIMENT_VARIABLE = "MLFLOW_EXPERIMENT_NAME"
# The job's S3 output path, where SageMaker uploads <job>/output/model.tar.gz: the run records the model's location.
OUTPUT_PATH_VARIABLE = "MODEL_S3_OUTPUT_PATH"
TRACKING_VARIABLES = (TRACKING_URI_VARIABLE, EXPERIMENT_VARIABLE, OUTPUT_PATH_VARIABLE)
# How long MLflow's client insists on a call its server does not answer. By default it retries 7 times, waiting 2, 4,
# ... 120 s between tries, and waits up to 120 s for each answer (mlflow.environment_variables): a tracked job whose
# server cannot be reached failed 4 minutes after its first call when the connection was refused, about 20 when nothing
# answered, and a job failing for any other reason spent as long again ending its run. A tracked job gets tighter
# bounds in MLflow's own variables (about 1 and 2 minutes; docs/experiment-tracking.md has the measurements), under
# its environment, which may set its own.
CLIENT_LIMITS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "5", "MLFLOW_HTTP_REQUEST_TIMEOUT": "10"}
_ARN = re.compile(r"arn:(?P<partition>[^:]+):sagemaker:(?P<region>[^:]*):(?P<account>[^:]*):(?P<type>[^/]*)/(?P<id>.*)")
EXAMPLE_ARN = "arn:aws:sagemaker:us-east-1:123456789012:mlflow-tracking-server/ranking"


@dataclass(frozen=True)
class MlflowRun:
    """Where a job's MLflow run lives: the server (or app), the experiment, the run's name."""

    resource_arn: str
    experiment_name: str
    run_name: str
    output_s3_uri: str

    def request_config(self) -> dict[str, str]:
        """CreateTrainingJob's `MlflowConfig`."""
        return {"MlflowResourceArn": self.resource_arn, "MlflowExperimentName": self.experiment_name,
                "MlflowRunName": self.run_name}

    def environment(self) -> dict[str, str]:
        """The variables MLflow's client reads, for every process of the job (and of a tuning job's trials)."""
        return {TRACKING_URI_VARIABLE: self.resource_arn, EXPERIMENT_VARIABLE: self.experiment_name,
                OUTPUT_PATH_VARIABLE: self.output_s3_uri}

    def job_environment(self, environment: dict[str, str]) -> dict[str, str]:
        """The tracked job's `Environment` (a tuning job's trials' too): the job's own `environment`, over
        CLIENT_LIMITS, under the variables above."""
        return {**CLIENT_LIMITS, **environment, **self.environment()}


def resource_kind(arn: str) -> str:
    """`mlflow-tracking-server` or `mlflow-app`, from a valid ARN."""
    match = _ARN.fullmatch(arn)
    return match.group("type") if match else ""


def resource_arn_errors(arn: str, where: str, *, region: str, arn_pattern: str) -> list[str]:
    """A managed MLflow ARN a job can log to: botocore's MlflowConfig pattern (`arn_pattern`), one of AWS's two
    resource types, in the stack's `region` (a job reaches MLflow in its own region)."""
    fix = f"give the ARN DescribeMlflowTrackingServer or DescribeMlflowApp shows, e.g. {EXAMPLE_ARN!r}"
    match = _ARN.fullmatch(arn)
    if match is None or not re.fullmatch(arn_pattern, arn) or not match.group("id"):
        return [f"{where}={arn!r} is not a SageMaker managed MLflow ARN (SageMaker's pattern {arn_pattern!r}): {fix}"]
    errors = []
    if match.group("type") not in RESOURCE_TYPES:
        errors.append(f"{where}={arn!r} names a {match.group('type')!r}, not one of {list(RESOURCE_TYPES)}: {fix}")
    if match.group("region") != region:
        errors.append(f"{where}={arn!r} is in region {match.group('region')!r}, not the stack's {region!r}: jobs "
                      f"log to MLflow in their own region; create the server there or deploy to its region")
    return errors


def experiment_name(project_prefix: str, dataset: str | None) -> str:
    """One experiment per dataset, as the registry keeps one model package group per dataset:
    `<prefix>-<dataset>`, or `<prefix>-manual` for a job started with explicit channels."""
    return f"{project_prefix}-{dataset or 'manual'}"
