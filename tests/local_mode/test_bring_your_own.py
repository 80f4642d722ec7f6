"""Scripts not written for this pipeline, through the whole of it in local mode: a stock Lightning module and a DDP
script in the shape of PyTorch's tutorial, each changed only as docs/bring-your-own.md says, and a script that does
not import sagemaker_distributed at all. Each runs as a 2-host x 2-rank job from the stack synthesized with
`-c source_dir=... -c entry_point=...`, and leaves its model in model.tar.gz. `pytorchddp` reaches SageMaker as
`smdistributed` (the trigger sends what the SDK sends), so for the Lightning module one test shows that the trigger's
request for it is the smdistributed job's, which the module's test runs."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from model_archives import model_json, model_members
from shared_stacks import BORING_MODEL, PLAIN_SCRIPTS

from local_mode.demo import (
    DATASET_NAME,
    DemoOptions,
    DemoResult,
    bring_your_own_context,
    channels_of,
    demo_manifest,
    run_demo_job,
)
from local_mode.aws.moto_endpoint import MotoEndpoint
from local_mode.pipeline import LocalPipeline
from local_mode.aws.synthesized_app import PROJECT_ROOT

pytestmark = pytest.mark.slow

EXAMPLES = PROJECT_ROOT / "examples"
LIGHTNING = dataclasses.replace(BORING_MODEL, hyperparameters=(("epochs", "2"),), instance_count=2)
EPOCH_METRIC = json.dumps([{"Name": "epoch", "Regex": r"Epoch ([0-9]+) \|"}])
TUTORIAL = DemoOptions(source_dir=EXAMPLES / "ddp-torchrun", entry_point="multigpu_torchrun.py",
                       hyperparameters=(("total-epochs", "3"),), metric_definitions=EPOCH_METRIC, instance_count=2)


def pipeline_for(options: DemoOptions, moto: MotoEndpoint, jobs_dir: Path) -> LocalPipeline:
    # The PyTorch 2.2.0 container's rules allow every distribution; local hosts run this Python whatever it is.
    return LocalPipeline(jobs_dir=jobs_dir, processes_per_host=2, stop_grace_seconds=10, moto=moto,
                         context={"framework_version": "2.2.0", **bring_your_own_context(options)})


@pytest.fixture(scope="module")
def lightning_pipeline(moto, tmp_path_factory) -> Iterator[LocalPipeline]:
    with pipeline_for(LIGHTNING, moto, tmp_path_factory.mktemp("lightning-jobs")) as pipeline:
        yield pipeline


@pytest.fixture(scope="module")
def tutorial_pipeline(moto, tmp_path_factory) -> Iterator[LocalPipeline]:
    with pipeline_for(TUTORIAL, moto, tmp_path_factory.mktemp("tutorial-jobs")) as pipeline:
        yield pipeline


def run(pipeline: LocalPipeline, options: DemoOptions, distribution: str, data: Path, work_dir: Path) -> DemoResult:
    return run_demo_job(pipeline, dataclasses.replace(options, distribution=distribution, work_dir=work_dir), data)


def host_logs(pipeline: LocalPipeline, result: DemoResult) -> str:
    job_dir = pipeline.jobs_dir / result.job_name
    return "\n".join(path.read_text() for path in sorted(job_dir.glob("algo-*/training.log")))


# torchrun, and the MPI-style ranks that both smdistributed and pytorchddp (the next test) launch.
@pytest.mark.parametrize("distribution", ["torch_distributed", "smdistributed"])
def test_a_stock_lightning_module_trains_on_two_hosts_of_two_ranks(distribution, lightning_pipeline, letor_data,
                                                                    tmp_path, report_job):
    # Given Lightning's BoringModel with the one-argument strategy, bundled from its own folder
    # When its dataset version lands and the trigger starts a 2-host job of this distribution (2 ranks per host)
    result = run(lightning_pipeline, LIGHTNING, distribution, letor_data, tmp_path)

    # Then it trained to completion as one world of four and left its model
    assert result.status == "Completed", report_job(lightning_pipeline.jobs_dir, result.job_name, result.failure_reason)
    assert "model.pt" in model_members(lightning_pipeline.s3, result.model_artifact)
    logs = host_logs(lightning_pipeline, result)
    # BoringModel: 64 samples in batches of one, split four ways -> 16 steps per epoch, 2 epochs
    assert "epochs=2 steps=32" in logs
    # And SageMaker's metric reading found the step count in the log
    assert result.metrics == {"steps": 32.0}


def launch(request: dict[str, Any]) -> dict[str, Any]:
    """What decides how a job's processes start and what they are given, less its name."""
    hyperparameters = {name: value for name, value in request["HyperParameters"].items()
                       if name != "sagemaker_job_name"}
    return {"HyperParameters": hyperparameters, "ResourceConfig": request["ResourceConfig"],
            "AlgorithmSpecification": request["AlgorithmSpecification"],
            "Environment": request.get("Environment", {})}


def test_a_stock_lightning_modules_pytorchddp_job_is_launched_as_its_smdistributed_job(lightning_pipeline,
                                                                                     letor_data):
    # Given the Lightning module's dataset in two versions, one whose manifest asks for pytorchddp, one smdistributed
    requests = {}
    for distribution in ("pytorchddp", "smdistributed"):
        manifest = demo_manifest(dataclasses.replace(LIGHTNING, distribution=distribution))
        version = f"launch-{distribution}"
        lightning_pipeline.upload_channels(channels_of(letor_data), dataset=DATASET_NAME, version=version,
                                           manifest=manifest)
        # When the trigger builds and checks each version's request without starting the job
        answer = lightning_pipeline.invoke_trigger({"dataset": DATASET_NAME, "version": version, "dry_run": True})
        assert answer["status"] == "dry_run", answer
        requests[distribution] = answer["request"]

    # Then pytorchddp is sent as smdistributed data parallel on the same 2 hosts: the job that the module's
    # smdistributed test trains, launched by the same MPI-style ranks
    assert launch(requests["pytorchddp"]) == launch(requests["smdistributed"])
    assert requests["pytorchddp"]["HyperParameters"]["sagemaker_distributed_dataparallel_enabled"] == "true"
    assert requests["pytorchddp"]["ResourceConfig"]["InstanceCount"] == 2


# Two hosts of two ranks each (torchrun, the MPI-style ranks), and one host running the script with plain `python` as
# SageMaker does without a distribution: a world of one rank.
@pytest.mark.parametrize("distribution, instance_count, ranks", [("torch_distributed", 2, 4), ("pytorchddp", 2, 4),
                                                                 ("none", 1, 1)])
def test_a_tutorial_shaped_ddp_script_trains_and_reports_its_own_metric(distribution, instance_count, ranks,
                                                                       tutorial_pipeline, letor_data, tmp_path,
                                                                       report_job):
    # Given the DDP tutorial's shape with the one call, and metric definitions that read its own log lines
    options = dataclasses.replace(TUTORIAL, instance_count=instance_count)
    result = run(tutorial_pipeline, options, distribution, letor_data, tmp_path)

    # Then every rank of every host trained, and SageMaker's metric reading found the last epoch
    assert result.status == "Completed", report_job(tutorial_pipeline.jobs_dir, result.job_name, result.failure_reason)
    assert "model.pt" in model_members(tutorial_pipeline.s3, result.model_artifact)
    logs = host_logs(tutorial_pipeline, result)
    assert all(f"[rank {rank}] Epoch 2 |" in logs for rank in range(ranks))
    assert result.metrics == {"epoch": 2.0}


@pytest.fixture(scope="module")
def plain_pipeline(moto, tmp_path_factory) -> Iterator[LocalPipeline]:
    with pipeline_for(PLAIN_SCRIPTS, moto, tmp_path_factory.mktemp("plain-jobs")) as pipeline:
        yield pipeline


def test_a_script_that_does_not_import_the_package_runs_under_torch_distributed(plain_pipeline, letor_data, tmp_path,
                                                                              report_job):
    # Given a plain torch.distributed script (env:// rendezvous, gloo), bundled with nothing changed
    result = run(plain_pipeline, PLAIN_SCRIPTS, "torch_distributed", letor_data, tmp_path)

    # Then torchrun's variables were enough: one world of four, and the model in model.tar.gz
    assert result.status == "Completed", report_job(plain_pipeline.jobs_dir, result.job_name, result.failure_reason)
    assert "world_size=4 steps=5" in host_logs(plain_pipeline, result)
    assert "model.pt" in model_members(plain_pipeline.s3, result.model_artifact)


# ModelTrainer's Torchrun() (torchrun on each host, --nnodes 2, master algo-1:7777) and no distribution (its basic
# driver: `python` on each host, the script meeting at SM_MASTER_ADDR:SM_MASTER_PORT itself).
@pytest.mark.parametrize("distribution, launcher", [("torch_distributed", "torchrun"), ("none", "python")])
def test_a_script_written_for_model_trainer_forms_one_group_across_two_hosts_under_its_drivers(
        container_namespaces, distribution, launcher, plain_pipeline, letor_data, tmp_path, report_job):
    # Given a script written for ModelTrainer (reading SM_HOST_COUNT, SM_CURRENT_HOST_RANK, SM_MASTER_ADDR), whose
    # manifest asks for the model_trainer launch on two hosts
    options = dataclasses.replace(PLAIN_SCRIPTS, entry_point="written_for_model_trainer.py", launch="model_trainer")

    # When its dataset version lands and the trigger starts the job
    result = run(plain_pipeline, options, distribution, letor_data, tmp_path)

    # Then ModelTrainer's request ran, not the toolkit: its drivers' command, its two channels, no sagemaker_ keys
    assert result.status == "Completed", report_job(plain_pipeline.jobs_dir, result.job_name, result.failure_reason)
    request = plain_pipeline.sagemaker.describe_training_job(TrainingJobName=result.job_name)
    assert request["AlgorithmSpecification"]["ContainerEntrypoint"] == ["/bin/bash"]
    assert [channel["ChannelName"] for channel in request["InputDataConfig"]] == ["train", "code", "sm_drivers"]
    assert not [name for name in request["HyperParameters"] if name.startswith("sagemaker_")]
    # And the two hosts formed one group of two at algo-1, rank i on host i, one process per host
    assert model_json(plain_pipeline.s3, result.model_artifact, "group.json") == {
        "launcher": launcher, "world_size": 2, "host_of_each_rank": [0, 1], "master": "algo-1"}
