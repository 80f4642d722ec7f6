"""A tracked job's MLflow run, with local mode's tracking server (local_mode.aws.mlflow_server) standing in for
SageMaker's managed one.

The pipeline gives a tracked job MLflow's own variables beside `MlflowConfig` (docs/experiment-tracking.md):
`MLFLOW_TRACKING_URI` is the managed server's ARN, which the sagemaker-mlflow plugin resolves inside the container to
the service's address and signs each call for with the execution role's credentials. Here the job's processes see the
same ARN, and where it is the local server's, the plugin's own `SAGEMAKER_MLFLOW_CUSTOM_ENDPOINT` sends its calls to
that server instead (as `AWS_ENDPOINT_URL_*` sends the trigger's to the local endpoints), signed with local mode's
dummy credentials in place of the role's (the server checks no signature); a tuning job's trials too, which carry the
variables without `MlflowConfig`. The job waits for the server to answer before it starts. A job whose hosts run in a
network of their own (a ContainerEntrypoint: ModelTrainer's drivers) reaches the server's port through a relay
(local_mode.container.loopback_relay), at the same address. After training, the run
logged under `MlflowConfig`'s experiment and run name is what DescribeTrainingJob reports in `MlflowDetails`, as
SageMaker reports the run it used.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from typing import Any

from local_mode.aws.local_clients import dummy_credentials_environment
from local_mode.aws.mlflow_server import LocalMlflowServer, TrackingServerError
from local_mode.aws.network import LOOPBACK
from stacks.trigger_modules import trigger_module

TRACKING_URI_VARIABLE = trigger_module("experiment_tracking.py").TRACKING_URI_VARIABLE
# Where the sagemaker-mlflow plugin sends the calls for any ARN, in place of the managed service's address
# (sagemaker_mlflow.mlflow_sagemaker_helpers.SageMakerMLflowHostMetadataProvider.construct_tracking_server_url).
PLUGIN_ENDPOINT_VARIABLE = "SAGEMAKER_MLFLOW_CUSTOM_ENDPOINT"


def job_environment(environment: Mapping[str, str], server: LocalMlflowServer | None) -> dict[str, str]:
    """The job's `Environment` as its processes get it: where it names the local server's ARN, with the plugin's
    endpoint and credentials to sign with (the job's own, if it sets them, win)."""
    if server is None or environment.get(TRACKING_URI_VARIABLE) != server.resource_arn:
        return dict(environment)
    return {**dummy_credentials_environment(), **environment, PLUGIN_ENDPOINT_VARIABLE: server.url_when_ready()}


def loopback_ports(environment: Mapping[str, str]) -> set[int]:
    """The ports on this machine's loopback that a job's processes call, given `environment` (job_environment's):
    the tracking server's, where the plugin's endpoint names one."""
    endpoint = urllib.parse.urlsplit(environment.get(PLUGIN_ENDPOINT_VARIABLE, ""))
    return {endpoint.port} if endpoint.hostname == LOOPBACK and endpoint.port else set()


def mlflow_details(request: Mapping[str, Any], server: LocalMlflowServer | None) -> dict[str, str] | None:
    """DescribeTrainingJob's `MlflowDetails` of a job with `MlflowConfig`: the experiment and run it names, once the
    job logged to them; None when it logged no such run, or the server no longer answers (the job's own status
    stands)."""
    config = request.get("MlflowConfig") or {}
    if server is None or config.get("MlflowResourceArn") != server.resource_arn or not config.get(
            "MlflowExperimentName"):
        return None
    try:
        run = server.run_named(config["MlflowExperimentName"], config.get("MlflowRunName") or request["TrainingJobName"])
    except (OSError, TrackingServerError):  # urllib's errors are OSErrors
        return None
    return None if run is None else {"MlflowExperimentId": run.experiment_id, "MlflowRunId": run.run_id}
