"""A tracked demo: MLflow's own tracking server on 127.0.0.1 (local_mode.aws.mlflow_server, a SQLite store) stands in
for SageMaker's managed MLflow, the stacks are synthesized with its ARN as `mlflow_resource_arn`, and the demo's job of
each entry point logs to a run that is read back here through MLflow's client: the job's parameters, its validation
NDCG@10 at each validation as its log printed them, the model's location, its end. DescribeTrainingJob and the model
package the registrar made name the same run.

One small job per entry point (one host, one process, two epochs), shared by the module's tests: one launched by the
training toolkit, the other by SDK v3 ModelTrainer's drivers, whose hosts reach the server from a network of their own.
"""

from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient
from ranker.log_format import parse_metrics
from shared_stacks import DEMO_CONTEXT
from small_model import SMALL_MODEL

from local_mode.aws.mlflow_server import LocalMlflowServer
from local_mode.cli import ENTRY_POINTS, parse_options, render_summary
from local_mode.demo import DATASET_NAME, DemoOptions, DemoResult, run_demo_job
from local_mode.pipeline import LocalPipeline

pytestmark = pytest.mark.slow

EPOCHS = 2
EXPERIMENT = f"ranker-{DATASET_NAME}"  # the trigger's <project_prefix>-<dataset>


@pytest.fixture(scope="module")
def tracking_server(tmp_path_factory: pytest.TempPathFactory):
    with LocalMlflowServer(tmp_path_factory.mktemp("mlflow")) as server:
        yield server


@pytest.fixture(scope="module")
def tracked_pipeline(moto, tracking_server, tmp_path_factory: pytest.TempPathFactory):
    with LocalPipeline(jobs_dir=tmp_path_factory.mktemp("tracked-jobs"), moto=moto, context=DEMO_CONTEXT,
                       tracking=tracking_server) as pipeline:
        yield pipeline


TRACKED_LAUNCHES = {"train_ddp.py": "toolkit", "train_lightning.py": "model_trainer"}
"""What launches each entry point's tracked job: the training toolkit, or ModelTrainer's drivers."""


@pytest.fixture(scope="module")
def tracked_jobs(tracked_pipeline, letor_data, tmp_path_factory) -> dict[str, DemoResult]:
    """The demo's job of each entry point, tracked."""
    hyperparameters = tuple((name, str(value)) for name, value in SMALL_MODEL.items())
    return {entry_point: run_demo_job(tracked_pipeline, DemoOptions(
                queries=64, epochs=EPOCHS, entry_point=entry_point, distribution="none", launch=launch,
                hyperparameters=hyperparameters, work_dir=tmp_path_factory.mktemp("work"), track=True), letor_data)
            for entry_point, launch in TRACKED_LAUNCHES.items()}


@pytest.fixture(params=ENTRY_POINTS)
def tracked_job(request, tracked_jobs, tracked_pipeline) -> DemoResult:
    """The entry point's tracked job, completed, launched as TRACKED_LAUNCHES says (ModelTrainer's where this machine
    can give its hosts their namespaces)."""
    by_model_trainer = TRACKED_LAUNCHES[request.param] == "model_trainer"
    if by_model_trainer:
        request.getfixturevalue("container_namespaces")
    result = tracked_jobs[request.param]
    assert result.status == "Completed", result.failure_reason
    description = tracked_pipeline.sagemaker.describe_training_job(TrainingJobName=result.job_name)
    assert ("ContainerEntrypoint" in description["AlgorithmSpecification"]) == by_model_trainer
    return result


@pytest.fixture(scope="module")
def client(tracking_server) -> MlflowClient:
    return MlflowClient(tracking_server.url_when_ready())


def _run(client: MlflowClient, job_name: str):
    experiment = client.get_experiment_by_name(EXPERIMENT)
    runs = client.search_runs([experiment.experiment_id], filter_string=f"attributes.run_name = '{job_name}'")
    assert len(runs) == 1, f"{job_name}: one run per job, found {len(runs)}"
    return runs[0]


def test_the_job_logs_its_parameters_to_a_finished_run_named_after_it(tracked_job, client):
    # Given the tracked demo job of the entry point / When its run is read back from the local tracking server
    run = _run(client, tracked_job.job_name)
    # Then it is the job's, finished, with the hyperparameters the manifest gave the job among its parameters
    assert run.info.status == "FINISHED"
    params = run.data.params
    assert (params["train.epochs"], params["model.width"], params["model.num_layers"]) == (
        str(EPOCHS), str(SMALL_MODEL["width"]), str(SMALL_MODEL["num-layers"]))


def test_the_run_holds_the_validation_ndcg_of_each_validation_the_job_printed(tracked_job, tracked_pipeline, client):
    result = tracked_job
    run = _run(client, result.job_name)
    # Given the validation lines the job's log printed (each epoch's names its step; the last line is the final one)
    log = (tracked_pipeline.jobs_dir / result.job_name / "algo-1" / "training.log").read_text()
    printed = [metrics["val_ndcg@10"] for metrics in map(parse_metrics, log.splitlines())
               if "val_ndcg@10" in metrics and "step" in metrics]
    # Then the run's val_ndcg_at_10 history holds each of them, in order, at increasing steps
    history = client.get_metric_history(run.info.run_id, "val_ndcg_at_10")
    assert len(printed) == EPOCHS
    assert [entry.value for entry in history[:len(printed)]] == pytest.approx(printed, abs=5e-4)
    steps = [entry.step for entry in history]
    assert steps == sorted(set(steps))
    # and the final metrics the job reported to SageMaker
    assert run.data.metrics["final_val_ndcg_at_10"] == pytest.approx(result.metrics["val_ndcg@10"], abs=5e-4)


def test_the_run_names_where_sagemaker_put_the_model_and_sagemaker_names_the_run(tracked_job, tracked_pipeline, client,
                                                                                tracking_server):
    result = tracked_job
    run = _run(client, result.job_name)
    description = tracked_pipeline.sagemaker.describe_training_job(TrainingJobName=result.job_name)
    # The model's location is the model.tar.gz local SageMaker uploaded
    assert run.data.tags["model_location"] == description["ModelArtifacts"]["S3ModelArtifacts"]
    # The request carried MlflowConfig, and the job's environment the server's ARN (what the trigger sends on AWS)
    assert description["MlflowConfig"] == {"MlflowResourceArn": tracking_server.resource_arn,
                                           "MlflowExperimentName": EXPERIMENT, "MlflowRunName": result.job_name}
    assert description["Environment"]["MLFLOW_TRACKING_URI"] == tracking_server.resource_arn
    # DescribeTrainingJob reports the run, and the registered model package names it
    assert description["MlflowDetails"] == {"MlflowExperimentId": run.info.experiment_id,
                                            "MlflowRunId": run.info.run_id}
    package = tracked_pipeline.sagemaker.describe_model_package(ModelPackageName=result.model_package_arn)
    assert package["CustomerMetadataProperties"]["mlflow-run-id"] == run.info.run_id
    # and the summary names it, with a command that browses it once the demo's server has stopped
    summary = render_summary(result)
    assert f"mlflow:    run {run.info.run_id} in experiment {EXPERIMENT}" in summary
    assert f"-m mlflow ui --backend-store-uri sqlite:///{tracking_server.store_dir / 'mlflow.db'}" in summary


def test_a_job_naming_another_tracking_server_is_refused_before_it_starts(tracked_pipeline, tracking_server,
                                                                          training_request):
    # Given a request whose MlflowConfig names a managed tracking server, out of a local job's reach
    other = tracking_server.resource_arn.replace("/local-mode", "/elsewhere")
    request = {**training_request("tracked-elsewhere", "write_model.py"),
               "MlflowConfig": {"MlflowResourceArn": other, "MlflowExperimentName": "x"}}
    # When it is sent / Then the service refuses it, naming the field, the value and the server it may name
    with pytest.raises(tracked_pipeline.sagemaker.exceptions.ClientError, match="ValidationException") as refused:
        tracked_pipeline.sagemaker.create_training_job(**request)
    message = refused.value.response["Error"]["Message"]
    assert f"MlflowConfig.MlflowResourceArn={other!r}" in message and tracking_server.resource_arn in message


def test_the_demos_track_flag_asks_for_tracking():
    assert parse_options(["--track"]).track and not parse_options([]).track
