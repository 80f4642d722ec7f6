"""Runs one training job the way the service and the SageMaker container do, with local hosts as folders.

Starting: a folder per host. Downloading: config files, channels (File mode), checkpoints, and for the training
toolkit the source bundle. Training: the toolkit launcher's processes, or the request's ContainerEntrypoint (SDK v3
ModelTrainer's drivers, which start the script themselves from the `code` and `sm_drivers` channels), logs streamed
(each host's to its training.log and, given a CloudWatch Logs client, to its log stream) and scraped for metrics.
Uploading: model.tar.gz and output.tar.gz to `<S3OutputPath>/<job name>/output/`. Then Completed, Failed (with the
service's "AlgorithmError: ..." reason) or Stopped (StopTrainingJob or MaxRuntimeInSeconds).
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from local_mode.job_runtime.artifacts import tar_folder_contents, unpack_archive
from local_mode.job_runtime.channel_sources import ChannelSources
from local_mode.job_runtime.checkpoint_sync import CheckpointSync
from local_mode.container.container_environment import (
    decode_hyperparameters,
    split_hyperparameters,
    training_environment,
    user_args,
)
from local_mode.container.container_entrypoint import (
    JobNetwork,
    container_command,
    container_environment,
    plan_container_launches,
)
from local_mode.container.container_layout import HostFolder, host_names, input_data_config, resource_config
from local_mode.job_runtime.job_log_streams import HostLogStreams
from local_mode.job_runtime.mlflow_tracking import job_environment, loopback_ports, mlflow_details
from local_mode.container.launcher import installed_mpirun, launcher_for, plan_launches
from local_mode.container.loopback_relay import LoopbackRelay
from local_mode.aws.mlflow_server import LocalMlflowServer
from local_mode.aws.network import free_port
from local_mode.container.process_group import LogSink, ProcessGroup
from local_mode.aws.s3_transfer import download_prefix, join_s3_uri, split_s3_uri, upload_file
from local_mode.container.torchrun_report import root_cause
from local_mode.job_runtime.training_job import TrainingJob

FAILURE_REASON_LIMIT = 1024  # FailureReason's maximum length in the service model
_ERROR_LINE = re.compile(r"(Error|Exception|error:)")


@dataclass(frozen=True)
class RunnerSettings:
    """Local-only knobs; everything else comes from the CreateTrainingJob request."""

    work_dir: Path
    processes_per_host: int = 1  # CPU ranks per local host (the service would use one per GPU)
    stop_grace_seconds: float = 30.0  # SIGTERM to SIGKILL (the service waits up to 120 s)
    checkpoint_sync_seconds: float = 2.0
    python: str = sys.executable  # the interpreter of the environment the job runs in
    # A container profile's environment: install the bundle's requirements.txt before launch, as the toolkit does.
    install_requirements: bool = False


class ClientError(Exception):
    """A problem with the request's inputs, reported as the service does: `ClientError: ...`."""


class FrameworkError(Exception):
    """The container's toolkit failed before the user's script ran: `AlgorithmError: Framework Error: ...`."""


def run_job(job: TrainingJob, *, s3: Any, settings: RunnerSettings, on_log_line: LogSink, logs: Any = None,
            tracking: LocalMlflowServer | None = None) -> None:
    """Run `job` to a terminal status; never raises (every outcome ends up in the job record). `logs`: a CloudWatch
    Logs client that receives each host's log stream. `tracking`: the MLflow tracking server a tracked job logs to
    (job_runtime.mlflow_tracking)."""
    try:
        _run(job, s3, logs, settings, on_log_line, tracking)
    except ClientError as error:
        job.finish("Failed", failure_reason=f"ClientError: {error}")
    except FrameworkError as error:
        job.finish("Failed", failure_reason=f"AlgorithmError: Framework Error: {error}"[:FAILURE_REASON_LIMIT])
    except Exception as error:  # an unexpected local-mode fault must still end the job, not hang its waiters
        job.finish("Failed", failure_reason=f"InternalServerError: {type(error).__name__}: {error}")


def _run(job: TrainingJob, s3: Any, logs: Any, settings: RunnerSettings, on_log_line: LogSink,
         tracking: LocalMlflowServer | None) -> None:
    request = job.request
    hosts = host_names(request["ResourceConfig"]["InstanceCount"])
    folders = {host: HostFolder(settings.work_dir / job.name / host) for host in hosts}
    for folder in folders.values():
        folder.create()

    job.advance("Downloading")
    # A request naming a ContainerEntrypoint (ModelTrainer's drivers) runs that command; otherwise the toolkit runs.
    command = container_command(request["AlgorithmSpecification"])
    framework, user = split_hyperparameters(decode_hyperparameters(request.get("HyperParameters", {})))
    sources = ChannelSources()
    for host in hosts:
        _download(request, s3, folders[host], host, hosts, sources)
    environments = ({host: job_environment(container_environment(request, host_count=len(hosts)), tracking)
                     for host in hosts} if command
                    else {host: _toolkit_environment(request, s3, folders[host], host, hosts, framework, tracking)
                          for host in hosts})
    checkpoints = None
    if "CheckpointConfig" in request:
        checkpoints = CheckpointSync(s3, request["CheckpointConfig"]["S3Uri"],
                                     [folder.checkpoint_dir for folder in folders.values()])
        checkpoints.pull()
    if job.stop_requested.is_set():
        job.finish("Stopped")
        return

    job.advance("Training")
    log_tails: dict[str, deque[str]] = {host: deque(maxlen=200) for host in hosts}
    log_files = {host: folder.log_file.open("a", encoding="utf-8") for host, folder in folders.items()}
    streams = HostLogStreams(logs, job.name) if logs is not None else None

    def on_line(host: str, line: str) -> None:
        line = sources.named(line)  # a channel file by its S3 object, not by the host folder's copy
        log_tails[host].append(line)
        log_files[host].write(line + "\n")
        if streams:
            streams.put(host, line)
        job.observe_log_line(line)
        on_log_line(host, line)

    def close_logs() -> None:
        for handle in log_files.values():
            handle.close()
        if streams:
            streams.close()

    if settings.install_requirements and not command:  # ModelTrainer's drivers install them themselves
        failure = _install_requirements(settings.python, {host: folder.code_dir for host, folder in folders.items()},
                                        on_line)
        if failure:
            close_logs()
            job.finish("Failed", failure_reason=failure)
            return
    max_runtime = request["StoppingCondition"].get("MaxRuntimeInSeconds", 86400)
    training_done = threading.Event()
    syncer = threading.Thread(target=_sync_until, args=(checkpoints, training_done, settings), daemon=True)
    with ExitStack() as container:
        container.callback(close_logs)
        if command:
            network = container.enter_context(JobNetwork())
            # The machine's loopback ports the hosts call (a tracking server's), at the same address in their network.
            for port in sorted(set().union(*map(loopback_ports, environments.values()))):
                container.enter_context(LoopbackRelay(network.enter(), port))
            launches = plan_container_launches(command, folders=folders, environments=environments, network=network,
                                               python=settings.python,
                                               install_requirements=settings.install_requirements)
        else:
            launches = plan_launches(
                launcher=launcher_for(framework), host_environments=environments,
                code_dirs={host: folder.code_dir for host, folder in folders.items()},
                entry_point=str(framework["sagemaker_program"]), user_args=user_args(user),
                processes_per_host=settings.processes_per_host, master_port=free_port(), mpirun=installed_mpirun(),
                python=settings.python)
        group = ProcessGroup(launches, on_line)
        group.start()
        syncer.start()
        try:
            ended = group.wait(deadline=time.monotonic() + max_runtime, stop_requested=job.stop_requested,
                               grace_seconds=settings.stop_grace_seconds)
        finally:
            training_done.set()
            syncer.join()
    if checkpoints:
        checkpoints.push()
    job.set_mlflow_details(mlflow_details(request, tracking))

    if ended.failed_host:
        job.finish("Failed", failure_reason=_algorithm_error(ended.code, folders[ended.failed_host],
                                                             list(log_tails[ended.failed_host]), sources))
        return
    if ended.reason == "exit":
        job.advance("Uploading")
    job.set_model_artifacts(_upload_artifacts(s3, job, folders[hosts[0]]))
    if ended.reason == "exit":
        job.finish("Completed")
    else:
        job.finish("Stopped", secondary_status="Stopped" if ended.reason == "stop" else "MaxRuntimeExceeded")


def _download(request: dict[str, Any], s3: Any, folder: HostFolder, host: str, hosts: list[str],
              sources: ChannelSources) -> None:
    """What SageMaker writes into the host's /opt/ml before the container starts: the config files and every
    channel (noting in `sources` where each file came from)."""
    channels = request.get("InputDataConfig", [])
    folder.write_config(hyperparameters=request.get("HyperParameters", {}),
                        resource_config=_resource_config(request, host, hosts),
                        input_data_config=_input_data_config(request))
    for channel in channels:
        _stage_channel(s3, channel, folder, shard=(hosts.index(host), len(hosts)), sources=sources)


def _resource_config(request: dict[str, Any], host: str, hosts: list[str]) -> dict[str, Any]:
    return resource_config(current_host=host, hosts=hosts, instance_type=request["ResourceConfig"]["InstanceType"])


def _input_data_config(request: dict[str, Any]) -> dict[str, Any]:
    return input_data_config(request.get("InputDataConfig", []),
                             request["AlgorithmSpecification"].get("TrainingInputMode", "File"))


def _toolkit_environment(request: dict[str, Any], s3: Any, folder: HostFolder, host: str, hosts: list[str],
                         framework: dict[str, Any], tracking: LocalMlflowServer | None) -> dict[str, str]:
    """The training toolkit's steps on the host: the source bundle unpacked into its code folder; returns the
    script's process environment: the job's `Environment` (with where the MLflow plugin sends a local tracking
    server's calls), under what the toolkit sets (SM_*, ...)."""
    _stage_code(s3, framework, folder)
    environment = training_environment(folder, job_name=request["TrainingJobName"], current_host=host, hosts=hosts,
                                       instance_type=request["ResourceConfig"]["InstanceType"],
                                       resource=_resource_config(request, host, hosts),
                                       input_data=_input_data_config(request),
                                       hyperparameters=request.get("HyperParameters", {}))
    return {**job_environment(request.get("Environment", {}), tracking), **environment}


def _stage_channel(s3: Any, channel: dict[str, Any], folder: HostFolder, shard: tuple[int, int],
                   sources: ChannelSources) -> None:
    """File mode for every channel (FastFile and Pipe stream in the cloud; locally a copy behaves the same)."""
    source = channel["DataSource"].get("S3DataSource")
    if source is None or source.get("S3DataType", "S3Prefix") != "S3Prefix":
        raise ClientError(f"channel {channel['ChannelName']!r}: local mode reads S3DataSource with S3DataType "
                          f"S3Prefix only; got {channel['DataSource']}")
    sharded = source.get("S3DataDistributionType") == "ShardedByS3Key"
    channel_dir = folder.channel_dir(channel["ChannelName"])
    copies = download_prefix(s3, source["S3Uri"], channel_dir, shard if sharded else (0, 1))
    sources.add(channel_dir, source["S3Uri"], copies)
    if not copies and shard[0] == 0:
        raise ClientError(f"No S3 objects found under S3 URL \"{source['S3Uri']}\" given in input data source. "
                          "Please ensure that the bucket exists in the selected region (us-east-1), that objects "
                          "exist under that S3 prefix, and that the role has s3:ListBucket on it.")


def _stage_code(s3: Any, framework: dict[str, Any], folder: HostFolder) -> None:
    """The toolkit's step: unpack sagemaker_submit_directory, an S3 object, or with network isolation a file in the
    container that an input channel brought."""
    bundle = str(framework.get("sagemaker_submit_directory") or "")
    if not bundle or not framework.get("sagemaker_program"):
        raise ClientError("local mode runs script mode only: the hyperparameters need sagemaker_submit_directory "
                          "(a sourcedir.tar.gz in S3 or in an input channel) and sagemaker_program (the entry point)")
    if not bundle.startswith("s3://"):
        archive = folder.container_path(bundle)
        if archive is None or not archive.is_file():
            delivered = sorted(f"/opt/ml/{path.relative_to(folder.root)}" for path in folder.data_dir.rglob("*")
                               if path.is_file())
            raise FrameworkError(f"FileNotFoundError: [Errno 2] No such file or directory: '{bundle}' "
                                 f"(sagemaker_submit_directory; the input channels delivered {delivered})")
        unpack_archive(archive, folder.code_dir)
        return
    bucket, key = split_s3_uri(bundle)
    with tempfile.TemporaryDirectory() as scratch:
        archive = Path(scratch) / "sourcedir.tar.gz"
        s3.download_file(bucket, key, str(archive))
        unpack_archive(archive, folder.code_dir)


def _install_requirements(python: str, code_dirs: dict[str, Path], on_line: LogSink) -> str | None:
    """The toolkit's step before launch, on every host: `python -m pip install -r requirements.txt` in the code
    folder, its output in the host's log; the service's FailureReason when it fails."""
    for host, code_dir in code_dirs.items():
        if not (code_dir / "requirements.txt").is_file():
            continue
        result = subprocess.run([python, "-m", "pip", "install", "-r", "requirements.txt"], cwd=code_dir,
                                capture_output=True, text=True)
        for line in (result.stdout + result.stderr).splitlines():
            on_line(host, line)
        if result.returncode != 0:
            message = (result.stdout + result.stderr).strip().splitlines()[-3:]
            reason = (f"AlgorithmError: InstallRequirementsError:\nExitCode {result.returncode}\n"
                      f"ErrorMessage \"{' '.join(message)}\"")
            return reason[:FAILURE_REASON_LIMIT]
    return None


def _sync_until(checkpoints: CheckpointSync | None, done: threading.Event, settings: RunnerSettings) -> None:
    while checkpoints and not done.wait(settings.checkpoint_sync_seconds):
        checkpoints.push()


def _algorithm_error(exit_code: int, folder: HostFolder, log_tail: list[str], sources: ChannelSources) -> str:
    """The failed host's own /opt/ml/output/failure when it wrote one, else the last error lines its processes
    logged; under torchrun, followed by the root cause torchrun reported (the failed rank, its exit code or signal).
    A channel file is named by its S3 object."""
    torchrun = root_cause(log_tail)
    if folder.failure_file.is_file():
        message = sources.named(folder.failure_file.read_text().strip())
    else:
        # torchrun's report is its own traceback and table, not the workers' errors: those come before it.
        worker_lines = log_tail[:torchrun.report_start] if torchrun else log_tail
        lines = [line.strip() for line in worker_lines if line.strip()]
        errors = [line for line in lines if _ERROR_LINE.search(line)] or lines
        message = "\n".join(errors[-3:])
    reason = f"AlgorithmError: ExecuteUserScriptError:\nExitCode {exit_code}\nErrorMessage \"{message}\""
    if torchrun:
        # Kept whole when the reason is cut to the service's limit: it names the rank that failed first.
        summary = torchrun.summary()[:FAILURE_REASON_LIMIT // 2]
        return f"{reason[:FAILURE_REASON_LIMIT - len(summary) - 1]}\n{summary}"
    return reason[:FAILURE_REASON_LIMIT]


def _upload_artifacts(s3: Any, job: TrainingJob, first_host: HostFolder) -> str:
    """Pack and upload model.tar.gz and output.tar.gz; returns the model artifact's URI."""
    output_uri = join_s3_uri(job.request["OutputDataConfig"]["S3OutputPath"], job.name, "output")
    packaging = first_host.root.parent / "packaging"
    model_uri = join_s3_uri(output_uri, "model.tar.gz")
    upload_file(s3, tar_folder_contents(first_host.model_dir, packaging / "model.tar.gz"), model_uri)
    upload_file(s3, tar_folder_contents(first_host.output_data_dir, packaging / "output.tar.gz"),
                join_s3_uri(output_uri, "output.tar.gz"))
    return model_uri
