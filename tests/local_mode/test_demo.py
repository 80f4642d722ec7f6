"""The demo end to end at small size: a dataset version lands in the stack's bucket, its marker event reaches the
trigger (run from the synthesized asset with the template's environment), and local SageMaker trains the real
entry points in each distribution mode. The artifact is the model the service would hand to a user."""

from __future__ import annotations

import io
import json
import re
import subprocess
import tarfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from ranker.data.synthetic import generate
from safetensors.torch import load_file
from ranker.model.export import load_scorer
from sklearn.metrics import ndcg_score
from small_model import SMALL_MODEL

from local_mode.cli import main, render_summary
from local_mode.demo import DATASET_NAME, DemoOptions, DemoResult, demo_manifest, run_demo_job
from local_mode.sagemaker_api.job_state_events import training_job_state_change_event
from local_mode.aws.local_clients import local_client
from local_mode.sagemaker_api.model_endpoint import EndpointError, LocalModelEndpoint
from local_mode.pipeline import LocalPipeline
from local_mode.aws.s3_transfer import list_keys, split_s3_uri
from local_mode.aws.synthesized_app import PROJECT_ROOT
from local_mode.aws.trigger_invocation import invoke_trigger
from stacks.config import RegistrationThreshold
from stacks.inference_image import InferenceImage
from stacks.model_registration import registrar_environment

pytestmark = pytest.mark.slow

EPOCHS = 1


def small_demo(tmp_path: Path, hyperparameters: tuple[tuple[str, str], ...] = (), **options: Any) -> DemoOptions:
    small_model = tuple((name, str(value)) for name, value in SMALL_MODEL.items())
    return DemoOptions(**{"queries": 64, "epochs": EPOCHS, "work_dir": tmp_path,
                          "hyperparameters": small_model + hyperparameters, **options})


@pytest.fixture(scope="module")
def completed_job(demo_pipeline: LocalPipeline, letor_data: Path,
                  tmp_path_factory: pytest.TempPathFactory) -> DemoResult:
    """One single-process job (distribution none, the native DDP script), shared by the tests that read its result."""
    # Six epochs: enough for the model test to tell a trained ranking from a random one.
    options = small_demo(tmp_path_factory.mktemp("none"), distribution="none", entry_point="train_ddp.py", epochs=6)
    return run_demo_job(demo_pipeline, options, letor_data)


def assert_completed_demo(result: DemoResult, pipeline: LocalPipeline) -> None:
    assert result.status == "Completed", result.failure_reason
    assert result.job_name.startswith(pipeline.static_settings["job_name_prefix"] + "-")
    assert result.model_artifact == (f"{pipeline.environment['OUTPUT_S3_URI']}{result.job_name}/output/model.tar.gz")
    assert result.ndcg_at_10 is not None and 0 < result.ndcg_at_10 <= 1
    assert result.plots and all(plot.read_bytes().startswith(b"\x89PNG") for plot in result.plots)


def test_a_single_process_demo_job_completes(completed_job, demo_pipeline):
    # Given a dataset version whose manifest asks for distribution none (fixture)
    # Then the trigger's job completed with NDCG@10, the model in the stack's artifacts bucket and the plots
    assert_completed_demo(completed_job, demo_pipeline)
    description = demo_pipeline.sagemaker.describe_training_job(TrainingJobName=completed_job.job_name)
    assert not any(name.endswith("_enabled") for name in description["HyperParameters"])


def assert_ran_on_hosts(result: DemoResult, pipeline: LocalPipeline, instance_count: int) -> dict[str, Any]:
    """The job completed as a demo job does, on `instance_count` local hosts; returns its description."""
    assert_completed_demo(result, pipeline)
    description = pipeline.sagemaker.describe_training_job(TrainingJobName=result.job_name)
    assert description["ResourceConfig"]["InstanceCount"] == instance_count
    job_dir = pipeline.jobs_dir / result.job_name
    assert sorted(path.parent.name for path in job_dir.glob("algo-*/training.log")) == [
        f"algo-{index}" for index in range(1, instance_count + 1)]
    return description


TOOLKIT_TWO_HOSTS = {"train_ddp.py": "pytorchddp", "train_lightning.py": "torch_distributed"}
"""Each entry point's two-host job under the toolkit's launch: MPI-style ranks (pytorchddp, sent as smdistributed) and
torchrun."""
MODEL_TRAINER_ENTRY_POINT = "train_lightning.py"
"""The entry point of the two-host job under ModelTrainer's drivers: the Lightning loop, whose toolkit job is torchrun
too, so the two jobs differ in their launch only."""


@pytest.fixture(scope="module")
def two_host_jobs(demo_pipeline: LocalPipeline, letor_data: Path,
                  tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], DemoResult]:
    """Two-host jobs by (launch, entry point): both entry points under the toolkit (TOOLKIT_TWO_HOSTS), and
    train_lightning.py as torch_distributed under ModelTrainer's torchrun driver.

    train_ddp.py has no ModelTrainer job of its own: the driver starts either entry point with the same command and
    environment, which both read through sagemaker_distributed, and train_ddp.py under torchrun on two hosts is
    test_sharded_pipeline's job; a script of ModelTrainer's own shape is test_bring_your_own's."""
    jobs = [("toolkit", distribution, entry_point) for entry_point, distribution in TOOLKIT_TWO_HOSTS.items()]
    jobs += [("model_trainer", "torch_distributed", MODEL_TRAINER_ENTRY_POINT)]
    return {(launch, entry_point): run_demo_job(demo_pipeline, small_demo(
                tmp_path_factory.mktemp(launch), distribution=distribution, entry_point=entry_point, instance_count=2,
                launch=launch), letor_data)
            for launch, distribution, entry_point in jobs}


@pytest.mark.parametrize(("entry_point", "launch_flag"), [
    ("train_ddp.py", "sagemaker_distributed_dataparallel_enabled"),
    ("train_lightning.py", "sagemaker_torch_distributed_enabled"),
])
def test_the_toolkit_trains_the_demo_on_two_hosts(entry_point, launch_flag, two_host_jobs, demo_pipeline):
    # Given the demo's dataset with a manifest asking for pytorchddp or torch_distributed on two hosts (fixture)
    # Then the job completed, launched as the toolkit launches that mode, on two local hosts
    description = assert_ran_on_hosts(two_host_jobs["toolkit", entry_point], demo_pipeline, 2)
    assert description["HyperParameters"][launch_flag] == "true"


def test_the_demo_trains_on_two_hosts_under_model_trainers_drivers(container_namespaces, two_host_jobs, demo_pipeline):
    # Given the demo's dataset with a manifest asking for the model_trainer launch, torch_distributed on two hosts
    entry_point = MODEL_TRAINER_ENTRY_POINT
    result = two_host_jobs["model_trainer", entry_point]

    # Then the job completed with the demo's summary (NDCG@10, model, plots, package) on two local hosts
    description = assert_ran_on_hosts(result, demo_pipeline, 2)
    assert result.model_package_arn, result.not_registered_reason
    summary = render_summary(result)
    assert f"NDCG@10:   {result.ndcg_at_10:.4f} (validation queries)" in summary
    assert "next:      PYTHONPATH=" in summary
    # And ModelTrainer's request started it: its drivers' command with the code and sm_drivers channels, the
    # manifest's hyperparameters and no sagemaker_ ones
    assert description["AlgorithmSpecification"]["ContainerArguments"][1].endswith("/sm_drivers/sm_train.sh")
    assert [channel["ChannelName"] for channel in description["InputDataConfig"]] == ["train", "code", "sm_drivers"]
    assert not [name for name in description["HyperParameters"] if name.startswith("sagemaker_")]
    # And on each host the torchrun driver started torchrun as node <host rank> of two, meeting at algo-1:7777
    job_dir = demo_pipeline.jobs_dir / result.job_name
    for node_rank, host in enumerate(["algo-1", "algo-2"]):
        assert (f"Executing command: torchrun --nnodes=2 --nproc_per_node=1 --master_addr=algo-1 --master_port=7777 "
                f"--node_rank={node_rank} {entry_point}") in (job_dir / host / "training.log").read_text()
    # And it reached the weights the toolkit's launch of its two-host job reaches
    toolkit = two_host_jobs["toolkit", entry_point]
    assert_same_weights(load_file(result.model_dir / "model.safetensors"),
                        load_file(toolkit.model_dir / "model.safetensors"))


def assert_same_weights(first: dict[str, torch.Tensor], second: dict[str, torch.Tensor]) -> None:
    assert first.keys() == second.keys()
    for name in first:
        assert torch.equal(first[name], second[name]), f"weights {name} differ"


def test_a_duplicate_marker_upload_starts_no_second_job(completed_job, demo_pipeline):
    # Given the completed job's dataset version, whose producer uploads the same manifest.json again
    description = demo_pipeline.sagemaker.describe_training_job(TrainingJobName=completed_job.job_name)
    channel_uri = description["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3Uri"]
    version_root = split_s3_uri(channel_uri)[1].removesuffix("train/")
    marker_key = version_root + "manifest.json"
    bucket = demo_pipeline.environment["DATA_BUCKET"]
    body = demo_pipeline.s3.get_object(Bucket=bucket, Key=marker_key)["Body"].read()
    demo_pipeline.s3.put_object(Bucket=bucket, Key=marker_key, Body=body)

    # When the new upload's event reaches the trigger
    result = demo_pipeline.deliver(marker_key)

    # Then the trigger reports a duplicate of the same job, and SageMaker holds that one job only
    assert result == {"status": "duplicate", "job_name": completed_job.job_name}
    summaries = demo_pipeline.sagemaker.list_training_jobs(NameContains=completed_job.job_name)
    assert [summary["TrainingJobName"] for summary in summaries["TrainingJobSummaries"]] == [completed_job.job_name]


def test_the_model_artifact_loads_and_ranks_better_than_chance(completed_job, demo_pipeline, tmp_path):
    # Given the completed job's model.tar.gz, unpacked as a user would
    bucket, key = split_s3_uri(completed_job.model_artifact)
    archive = demo_pipeline.s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(tmp_path, filter="data")

    # When the public loader scores queries the model never saw
    scorer = load_scorer(tmp_path)
    held_out = generate(32, seed=987)
    with torch.no_grad():
        scores = scorer(torch.from_numpy(held_out.features.astype(np.float32))).reshape(-1).numpy()

    # Then the scores tell documents apart and rank them better than random scores do
    assert np.unique(scores).size > len(scores) // 2
    random_scores = np.random.default_rng(0).random(len(scores))
    assert mean_ndcg_at_10(held_out, scores) > mean_ndcg_at_10(held_out, random_scores) + 0.05


def mean_ndcg_at_10(data: Any, scores: np.ndarray) -> float:
    bounds = zip(data.query_offsets[:-1], data.query_offsets[1:])
    return float(np.mean([ndcg_score([data.labels[start:end]], [scores[start:end]], k=10) for start, end in bounds]))


def test_stopping_a_demo_job_ends_it_stopped_with_a_checkpoint(demo_pipeline, letor_data, tmp_path, report_job):
    # Given a long demo job (every one of its epochs: no early stopping) that has begun reporting metrics
    options = small_demo(tmp_path, distribution="none", entry_point="train_ddp.py", epochs=500,
                         hyperparameters=(("early-stopping", "0"),))
    marker = demo_pipeline.upload_dataset(letor_data, dataset="stop-me", version="v1",
                                          manifest=demo_manifest(options))
    job_name = demo_pipeline.deliver(marker)["job_name"]
    wait_for_first_metric(demo_pipeline, job_name)

    # When StopTrainingJob is called
    demo_pipeline.sagemaker.stop_training_job(TrainingJobName=job_name)
    description = demo_pipeline.wait(job_name, timeout=60)

    # Then the job ends Stopped through Stopping, and the script's SIGTERM checkpoint reached the checkpoint URI
    assert description["TrainingJobStatus"] == "Stopped"
    steps = [transition["Status"] for transition in description["SecondaryStatusTransitions"]]
    assert steps[-2:] == ["Stopping", "Stopped"]
    assert list_keys(demo_pipeline.s3, description["CheckpointConfig"]["S3Uri"]), report_job(
        demo_pipeline.jobs_dir, job_name, description.get("FailureReason"))


def wait_for_first_metric(pipeline: LocalPipeline, job_name: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        description = pipeline.sagemaker.describe_training_job(TrainingJobName=job_name)
        assert description["TrainingJobStatus"] == "InProgress", description.get("FailureReason")
        if description["FinalMetricDataList"]:
            return
        time.sleep(0.2)
    raise AssertionError(f"{job_name} reported no metric within {timeout} s")


def test_a_malformed_data_line_fails_the_job_with_the_users_file_and_token_before_torchruns_report(tmp_path, capsys):
    # Given a dataset whose training file's line 2 is not a LETOR row
    data = tmp_path / "corrupt"
    data.mkdir()
    (data / "rank.train").write_text("2 qid:1 1:0.5 2:0.1\n5;0.2244\n1 qid:1 1:0.4 2:0.3\n")

    # When the demo runs on it, with its defaults (one host, one process under torchrun)
    exit_code = main(["--data", str(data), "--epochs", "1", "--work-dir", str(tmp_path)])

    # Then the job failed and the demo exits non-zero
    captured = capsys.readouterr()
    output = (captured.out + captured.err).splitlines()
    assert exit_code != 0
    assert "status:    Failed" in output
    # And the reason names the uploaded S3 object (not the job's copy of it), the line and the offending token in the
    # file format's words, not Python's
    said = re.compile(r"s3://\S+/train/rank\.train:2: not a LETOR row: the label '5;0\.2244' is not a number")
    reason = next(index for index, line in enumerate(output) if line.startswith("reason:"))
    assert said.search("\n".join(output[reason:reason + 4])), output[reason:]
    assert not [line for line in output if "/input/data/train" in line or "convert string" in line
                or "unpack" in line]
    # And in the job's log it comes first: before any traceback, torchrun's ChildFailedError report among them
    error = next(index for index, line in enumerate(output) if said.search(line))
    first_traceback = next(index for index, line in enumerate(output) if "Traceback" in line)
    assert error < first_traceback < reason
    assert any("ChildFailedError" in line for line in output[first_traceback:reason])


def test_a_completed_job_leaves_a_registered_package_whose_metrics_match_metrics_json(completed_job, demo_pipeline):
    # Given the completed demo job, whose state change event reached the registrar (run_demo_job)
    assert completed_job.model_package_arn, completed_job.not_registered_reason
    # When its model package is read back from the registry
    package = demo_pipeline.sagemaker.describe_model_package(ModelPackageName=completed_job.model_package_arn)
    # Then it is a version of the dataset's group, pending approval, with the stack's inference image and the
    # job's artifact
    assert package["ModelPackageGroupName"] == f"{demo_pipeline.static_settings['job_name_prefix']}-{DATASET_NAME}"
    assert package["ModelApprovalStatus"] == "PendingManualApproval"
    container, = package["InferenceSpecification"]["Containers"]
    assert container["Image"] == demo_pipeline.registrar.environment["INFERENCE_IMAGE_URI"]
    assert container["Image"] != demo_pipeline.environment["TRAINING_IMAGE_URI"]
    assert container["ModelDataUrl"] == completed_job.model_artifact
    # And its model quality metrics are the ones the artifact's metrics.json holds (logs carry 6 significant digits)
    bucket, key = split_s3_uri(package["ModelMetrics"]["ModelQuality"]["Statistics"]["S3Uri"])
    report = json.loads(demo_pipeline.s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    registered = {name: entry["value"] for name, entry in report["ranking_metrics"].items()}
    written = json.loads((completed_job.model_dir / "metrics.json").read_text())
    # metrics.json also names the step and epoch whose weights were exported and the devices its defaults were sized
    # for: provenance, not model metrics
    written = {name: value for name, value in written.items()
               if not name.startswith("exported_") and name != "defaults"}
    assert sorted(registered) == sorted(written)
    assert registered == {name: pytest.approx(value, rel=1e-5) for name, value in written.items()}


def test_the_registered_package_deploys_and_answers_with_the_models_scores(completed_job, demo_pipeline, tmp_path):
    # Given the completed job's registered package, read back from the registry
    package = demo_pipeline.sagemaker.describe_model_package(ModelPackageName=completed_job.model_package_arn)
    held_out = generate(4, seed=321)
    rows = held_out.features.astype(np.float32)
    # When it is deployed as an endpoint deploys it (model unpacked from ModelDataUrl, the package's environment,
    # the PyTorch inference toolkit's handler service in TorchServe's worker) and asked to score documents
    with LocalModelEndpoint(package, s3=demo_pipeline.s3, work_dir=tmp_path) as endpoint:
        answer = endpoint.invoke(json.dumps({"instances": rows.tolist()}).encode(), "application/json",
                                 "application/json")
        refused = endpoint.invoke(b"not json", "application/json", "application/json")
        again = endpoint.invoke(json.dumps({"instances": rows[:2].tolist()}).encode(), "application/json")
    # Then it answers with one score per document, the trained model's scores
    assert (answer.status, answer.content_type) == (200, "application/json"), answer.body[-2000:]
    scores = json.loads(answer.body)["scores"]
    with torch.no_grad():
        expected = load_scorer(completed_job.model_dir)(torch.from_numpy(rows)).reshape(-1).numpy()
    assert scores == pytest.approx(expected.tolist(), abs=1e-5)
    # And a bad request is answered as the toolkit answers it, without taking the model server down
    assert refused.status >= 400, refused
    assert again.status == 200 and json.loads(again.body)["scores"] == pytest.approx(scores[:2], abs=1e-6)


def test_a_package_naming_a_training_image_cannot_be_deployed(completed_job, demo_pipeline, tmp_path):
    package = demo_pipeline.sagemaker.describe_model_package(ModelPackageName=completed_job.model_package_arn)
    container = {**package["InferenceSpecification"]["Containers"][0],
                 "Image": demo_pipeline.environment["TRAINING_IMAGE_URI"]}
    with pytest.raises(EndpointError, match="no AWS PyTorch inference image"):
        LocalModelEndpoint({"InferenceSpecification": {"Containers": [container]}}, s3=demo_pipeline.s3,
                           work_dir=tmp_path)


def test_a_model_below_the_threshold_is_not_registered_and_the_notification_says_why(completed_job, demo_pipeline):
    # Given a threshold just above the completed job's validation NDCG@10, as registration_threshold sets it
    written = json.loads((completed_job.model_dir / "metrics.json").read_text())
    threshold = RegistrationThreshold(metric="val_ndcg@10", minimum=round(written["val_ndcg@10"] + 0.001, 4))
    deployed = demo_pipeline.registrar.environment
    environment = {**deployed, **registrar_environment(
        project_prefix=deployed["PROJECT_PREFIX"], quality_metrics=tuple(deployed["MODEL_QUALITY_METRICS"].split(",")),
        threshold=threshold, inference_image=InferenceImage(uri=deployed["INFERENCE_IMAGE_URI"],
                                                            framework_version=deployed["INFERENCE_FRAMEWORK_VERSION"]),
        inference_instance_type=deployed["INFERENCE_INSTANCE_TYPE"],
        notification_topic_arn=deployed["NOTIFICATION_TOPIC_ARN"])}
    # And a queue subscribed to the notification topic, as an e-mail address would be
    sqs = local_client("sqs", demo_pipeline.moto_url)
    queue_url = sqs.create_queue(QueueName="registrar-notifications")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    local_client("sns", demo_pipeline.moto_url).subscribe(TopicArn=environment["NOTIFICATION_TOPIC_ARN"],
                                                          Protocol="sqs", Endpoint=queue_arn)
    group = f"{environment['PROJECT_PREFIX']}-{DATASET_NAME}"
    versions_before = demo_pipeline.sagemaker.list_model_packages(ModelPackageGroupName=group)
    # When the job's Completed event reaches the registrar running with that threshold
    description = demo_pipeline.sagemaker.describe_training_job(TrainingJobName=completed_job.job_name)
    tags = demo_pipeline.sagemaker.list_tags(ResourceArn=description["TrainingJobArn"])["Tags"]
    result = invoke_trigger(training_job_state_change_event(description, tags, account=demo_pipeline.account),
                            account=demo_pipeline.account, function_environment=environment,
                            s3_url=demo_pipeline.moto_url, sns_url=demo_pipeline.moto_url,
                            sagemaker_url=demo_pipeline.sagemaker.meta.endpoint_url,
                            code_dir=demo_pipeline.registrar.code_dir, handler=demo_pipeline.registrar.handler,
                            function_name="model-registration")
    # Then no version is added to the group, and the notification names the metric, its value and the minimum
    assert result["status"] == "refused"
    versions_after = demo_pipeline.sagemaker.list_model_packages(ModelPackageGroupName=group)
    assert len(versions_after["ModelPackageSummaryList"]) == len(versions_before["ModelPackageSummaryList"])
    envelope = json.loads(sqs.receive_message(QueueUrl=queue_url, WaitTimeSeconds=5)["Messages"][0]["Body"])
    assert envelope["Subject"] == f"Model not registered: {completed_job.job_name}"
    reason = json.loads(envelope["Message"])["reason"]
    assert f"val_ndcg@10={written['val_ndcg@10']:.4f} is below the registration threshold {threshold.minimum}" in reason


def test_the_summary_ends_with_a_scoring_command_that_runs_as_printed_from_the_repository_root(
        completed_job, letor_data, monkeypatch):
    # Given the completed demo job's summary, printed where `make demo` prints it: at the repository root
    monkeypatch.chdir(PROJECT_ROOT)
    [command] = [line.removeprefix("next:").strip() for line in render_summary(completed_job).splitlines()
                 if line.startswith("next:")]
    # When a shell at the repository root runs it as printed
    scored = subprocess.run(command, shell=True, executable="/bin/bash", cwd=PROJECT_ROOT, capture_output=True,
                            text=True, timeout=300)
    # Then it scores every row of the data the job trained on with the job's model, into scores.tsv beside it
    assert scored.returncode == 0, scored.stderr[-3000:]
    rows = len((letor_data / "rank.train").read_text().splitlines())
    assert f"scored {rows} rows of 1 file(s) into " in scored.stdout and "ndcg@10=" in scored.stdout
    written = (completed_job.model_dir.parent / "scores.tsv").read_text().splitlines()
    assert len(written) == rows + 1  # a header and a line per row


def test_the_summary_says_where_the_model_is_and_which_split_its_ndcg_is_from(completed_job):
    # Given the completed demo job (train channel only: the script holds out validation queries)
    summary = render_summary(completed_job)
    # Then the summary names the kept model folder, the package and the split, not an S3 URI that dies with the demo
    shown = summary.split("model:     ", 1)[1].split("/ (model.tar.gz unpacked)", 1)[0]
    assert Path(shown).resolve() == completed_job.model_dir.resolve()
    assert (completed_job.model_dir / "model_config.json").is_file()
    assert f"package:   {completed_job.model_package_arn}" in summary
    assert "(validation queries)" in summary and completed_job.ndcg_split == "validation"
    assert "s3://" not in summary
