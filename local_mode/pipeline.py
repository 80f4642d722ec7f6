"""The deployed pipeline, on this machine: the synthesized stacks' resources on moto's server, the trigger function
as the template configures it, and local SageMaker, all on 127.0.0.1.

    with LocalPipeline(jobs_dir=Path("local-runs/jobs")) as pipeline:
        marker = pipeline.upload_dataset(folder, dataset="web", version="v1", manifest={"training": {...}})
        result = pipeline.deliver(marker)  # {"status": "started", "job_name": ...}
        description = pipeline.wait(result["job_name"])
        registration = pipeline.deliver_job_state(description)  # {"status": "registered", ...} when Completed

A tuning job started on `pipeline.sagemaker` announces its state changes as EventBridge would: each event goes to
the registrar when one of the stack's rules that invoke it matches (`tuning_delivery(name)` is the registrar's answer
to the tuning job's final state, None when no rule matched).

With `tracking` (a running LocalMlflowServer), the stacks are synthesized with that server's ARN as
`mlflow_resource_arn`, as a tracked stack is deployed, and local SageMaker sends the jobs' MLflow calls for that ARN to
the server (job_runtime/mlflow_tracking.py).

The stalled-job watchdog runs on its schedule meanwhile (`watchdog_timing` shortens it), reading each host's log
stream from moto's CloudWatch Logs; `stopped_by_watchdog(job_name)` is what it reported for a job it stopped.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from local_mode.aws.bucket_events import object_created_event
from local_mode.container.container_envs import ContainerEnv
from local_mode.aws.event_rules import matches
from local_mode.sagemaker_api.job_state_events import training_job_state_change_event, tuning_job_state_change_event
from local_mode.job_runtime.job_runner import RunnerSettings
from local_mode.aws.local_clients import local_account_id, local_client
from local_mode.aws.mlflow_server import LocalMlflowServer
from local_mode.aws.moto_endpoint import MotoEndpoint
from local_mode.sagemaker_api.sagemaker_endpoint import LocalSageMaker
from local_mode.aws.stack_resources import LambdaFunction, LocalStackResources
from local_mode.aws.synthesized_app import synthesize
from local_mode.job_runtime.training_job import TERMINAL_STATUSES
from local_mode.sagemaker_api.training_job_service import JobLogSink, TrainingJobService, ignore_log_line
from local_mode.aws.trigger_invocation import invoke_trigger
from local_mode.sagemaker_api.tuning_job import TERMINAL_TUNING_STATUSES
from local_mode.sagemaker_api.tuning_job_service import TuningJobService
from local_mode.aws.watchdog_schedule import LocalSchedule, WatchdogTiming, schedule_seconds, scheduled_event
from stacks.function_names import REGISTRAR_SERVICE_NAME as REGISTRAR_NAME
from stacks.function_names import WATCHDOG_SERVICE_NAME as WATCHDOG_NAME

# The environment variable that tells each function apart from the stacks' other functions: the trigger's names the
# settings file in its bundle; the registrar's lists the metrics it registers; the watchdog's allows a silence.
TRIGGER_MARKER_VARIABLE = "STATIC_SETTINGS_FILE"
REGISTRAR_MARKER_VARIABLE = "MODEL_QUALITY_METRICS"
WATCHDOG_MARKER_VARIABLE = "STALL_SECONDS"
POLL_SECONDS = 0.5


class LocalPipeline:
    """Context manager; the attributes below are set once entered."""

    def __init__(self, *, jobs_dir: Path, processes_per_host: int = 1, stop_grace_seconds: float = 30.0,
                 on_log_line: JobLogSink = ignore_log_line, moto: MotoEndpoint | None = None,
                 context: Mapping[str, str] | None = None, container: ContainerEnv | None = None,
                 watchdog_timing: WatchdogTiming | None = None, tracking: LocalMlflowServer | None = None) -> None:
        """`moto`: a server already running (the caller stops it); by default the pipeline runs its own.
        `context`: `-c key=value` for synthesis. `container`: a container profile's environment to run jobs in
        (installing the bundle's requirements first, as the container does); by default this Python runs them.
        `watchdog_timing`: the watchdog's allowed silence and schedule period in seconds, in place of the stack's
        minutes. `tracking`: an MLflow tracking server, started (the caller stops it), that the jobs log to."""
        runs_in = ({"python": str(container.python), "install_requirements": True} if container else {})
        self._settings = RunnerSettings(work_dir=jobs_dir, processes_per_host=processes_per_host,
                                        stop_grace_seconds=stop_grace_seconds, **runs_in)
        self._context = {**(context or {}), **({"mlflow_resource_arn": tracking.resource_arn} if tracking else {})}
        self.tracking = tracking
        self._on_log_line = on_log_line
        self._owns_moto = moto is None
        self._moto = moto or MotoEndpoint()
        self._sagemaker_endpoint: LocalSageMaker | None = None
        self._watchdog_timing = watchdog_timing
        self._watchdog_schedule: LocalSchedule | None = None
        self._watchdog_lock = threading.Lock()
        self._watchdog_stops: dict[str, dict[str, Any]] = {}
        self.watchdog_errors: list[str] = []
        """Why sweeps failed (in the cloud their events land in the watchdog's dead-letter queue)."""
        self._registrar_patterns: list[dict[str, Any]] = []
        self._tuning_deliveries: dict[str, dict[str, Any] | None] = {}
        self._tuning_delivered = threading.Condition()
        self.account = ""
        self.trigger: LambdaFunction | None = None
        self.registrar: LambdaFunction | None = None
        self.watchdog: LambdaFunction | None = None
        self.s3: Any = None
        self.sagemaker: Any = None

    def __enter__(self) -> "LocalPipeline":
        assembly = synthesize(context=self._context)
        if self._owns_moto:
            self._moto.start()
        try:
            resources = LocalStackResources(assembly, self._moto.url)
            self.trigger = resources.lambda_function(TRIGGER_MARKER_VARIABLE)
            self.registrar = resources.lambda_function(REGISTRAR_MARKER_VARIABLE)
            self._registrar_patterns = resources.event_patterns_targeting(REGISTRAR_MARKER_VARIABLE)
            self.watchdog = resources.lambda_function(WATCHDOG_MARKER_VARIABLE, required=False)
            resources.publish_file_assets()
            resources.run_bucket_deployments()
            self.account = local_account_id(self._moto.url)
            service = TrainingJobService(s3_endpoint_url=self._moto.url, account_id=self.account,
                                         settings=self._settings, on_log_line=self._on_log_line,
                                         logs_endpoint_url=self._moto.url, tracking=self.tracking)
            tuning = TuningJobService(service, account_id=self.account, on_state_change=self._tuning_state_changed)
            self._sagemaker_endpoint = LocalSageMaker(tuning, registry_url=self._moto.url).start()
        except BaseException:
            self._stop_moto()
            raise
        self.s3 = local_client("s3", self._moto.url)
        self.sagemaker = local_client("sagemaker", self._sagemaker_endpoint.url)
        if self.watchdog:
            period = (self._watchdog_timing.period_seconds if self._watchdog_timing
                      else schedule_seconds(self.watchdog.schedule or ""))
            self._watchdog_schedule = LocalSchedule(period, self.sweep, self._sweep_failed).start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._watchdog_schedule:
            self._watchdog_schedule.stop()
        if self._sagemaker_endpoint:
            self._sagemaker_endpoint.stop()
        self._stop_moto()

    def _stop_moto(self) -> None:
        if self._owns_moto:
            self._moto.stop()

    @property
    def moto_url(self) -> str:
        """moto's server: S3, SNS and the Model Registry (through local SageMaker) of the local stacks."""
        return self._moto.url

    @property
    def jobs_dir(self) -> Path:
        """Each job's local hosts live in `<jobs_dir>/<job name>/algo-N/` (their /opt/ml)."""
        return self._settings.work_dir

    @property
    def environment(self) -> dict[str, str]:
        """The trigger function's environment as the stack sets it, resolved to the local resources."""
        assert self.trigger, "enter the LocalPipeline first"
        return self.trigger.environment

    @property
    def static_settings(self) -> dict[str, Any]:
        """The settings file synthesis wrote into the trigger's bundle (the name its environment gives)."""
        assert self.trigger, "enter the LocalPipeline first"
        return json.loads((self.trigger.code_dir / self.environment["STATIC_SETTINGS_FILE"]).read_text())

    def upload_dataset(self, folder: Path, *, dataset: str, version: str, manifest: dict[str, Any],
                       channel: str = "train") -> str:
        """Upload `folder`'s files as `channel` of the dataset version, then its manifest.json marker (last, as a
        producer closes a version); returns the marker's key."""
        return self.upload_channels({channel: folder}, dataset=dataset, version=version, manifest=manifest)

    def upload_channels(self, channels: Mapping[str, Path], *, dataset: str, version: str,
                        manifest: dict[str, Any]) -> str:
        """Upload each folder's files as its channel (`train`, `validation`, `test`) of the dataset version, then
        the manifest.json marker; returns the marker's key."""
        bucket, version_root = self.environment["DATA_BUCKET"], self.version_root(dataset, version)
        for channel, folder in channels.items():
            for path in sorted(folder.rglob("*")):
                if path.is_file():
                    self.s3.upload_file(str(path), bucket,
                                        f"{version_root}{channel}/{path.relative_to(folder).as_posix()}")
        return self.upload_marker(dataset=dataset, version=version, body=json.dumps(manifest).encode())

    def upload_marker(self, *, dataset: str, version: str, body: bytes, name: str = "manifest.json") -> str:
        key = self.version_root(dataset, version) + name
        self.s3.put_object(Bucket=self.environment["DATA_BUCKET"], Key=key, Body=body)
        return key

    def version_root(self, dataset: str, version: str) -> str:
        return f"{self.static_settings['dataset_prefix']}{dataset}/{version}/"

    def deliver(self, marker_key: str) -> dict[str, Any]:
        """EventBridge delivers the marker's `Object Created` event to the trigger; returns the handler's result."""
        return self.invoke_trigger(object_created_event(self.s3, bucket=self.environment["DATA_BUCKET"],
                                                        key=marker_key, account=self.account))

    def invoke_trigger(self, event: dict[str, Any]) -> dict[str, Any]:
        """Invoke the trigger function with any event (a manual payload, a schedule); returns its result."""
        assert self.trigger and self._sagemaker_endpoint, "enter the LocalPipeline first"
        return invoke_trigger(event, account=self.account, function_environment=self.trigger.environment,
                              s3_url=self._moto.url, sns_url=self._moto.url, sagemaker_url=self._sagemaker_endpoint.url,
                              code_dir=self.trigger.code_dir, handler=self.trigger.handler)

    def deliver_job_state(self, description: dict[str, Any]) -> dict[str, Any] | None:
        """EventBridge delivers the job's state change to the registrar when one of its rules matches (a Completed job
        of the project); returns the handler's result, or None for a state no rule matches."""
        tags = self.sagemaker.list_tags(ResourceArn=description["TrainingJobArn"])["Tags"]
        return self._to_registrar(training_job_state_change_event(description, tags, account=self.account))

    def _tuning_state_changed(self, description: dict[str, Any], tags: list[dict[str, str]]) -> None:
        """The tuning service's listener: its state change goes to the registrar as EventBridge would send it."""
        try:
            result = self._to_registrar(tuning_job_state_change_event(description, tags, account=self.account))
        except Exception as error:  # in the cloud the event would go to the registrar's dead-letter queue
            result = {"status": "failed", "reason": str(error)}
        if description["HyperParameterTuningJobStatus"] in TERMINAL_TUNING_STATUSES:
            with self._tuning_delivered:
                self._tuning_deliveries[description["HyperParameterTuningJobName"]] = result
                self._tuning_delivered.notify_all()

    def _to_registrar(self, event: dict[str, Any]) -> dict[str, Any] | None:
        """Invoke the registrar with `event` when a rule of the stacks that targets it matches; its result, or None."""
        assert self.registrar and self._sagemaker_endpoint, "enter the LocalPipeline first"
        if not any(matches(pattern, event) for pattern in self._registrar_patterns):
            return None
        return invoke_trigger(event, account=self.account, function_environment=self.registrar.environment,
                              s3_url=self._moto.url, sns_url=self._moto.url, sagemaker_url=self._sagemaker_endpoint.url,
                              code_dir=self.registrar.code_dir, handler=self.registrar.handler,
                              function_name=REGISTRAR_NAME)

    def tuning_delivery(self, tuning_job_name: str, *, timeout: float = 300) -> dict[str, Any] | None:
        """The registrar's answer to the tuning job's final state change, once delivered; None when no rule of the
        stacks sends that event to the registrar."""
        with self._tuning_delivered:
            if not self._tuning_delivered.wait_for(lambda: tuning_job_name in self._tuning_deliveries, timeout):
                raise TimeoutError(f"tuning job {tuning_job_name}: no final state change delivered after "
                                   f"{timeout:.0f} s")
            return self._tuning_deliveries[tuning_job_name]

    def sweep(self) -> dict[str, Any]:
        """One run of the stalled-job watchdog, as its schedule delivers it; returns the handler's result."""
        assert self.watchdog and self._sagemaker_endpoint, "enter a LocalPipeline whose stacks have the watchdog"
        environment = dict(self.watchdog.environment)
        if self._watchdog_timing:
            environment["STALL_SECONDS"] = str(self._watchdog_timing.stall_seconds)
        with self._watchdog_lock:  # one sweep at a time; a reader waits for the one under way
            result = invoke_trigger(scheduled_event(account=self.account, rule_name=f"{WATCHDOG_NAME}-schedule"),
                                    account=self.account, function_environment=environment, s3_url=self._moto.url,
                                    sns_url=self._moto.url, sagemaker_url=self._sagemaker_endpoint.url,
                                    logs_url=self._moto.url, code_dir=self.watchdog.code_dir,
                                    handler=self.watchdog.handler, function_name=WATCHDOG_NAME)
            self._watchdog_stops.update({job["job_name"]: job for job in result["jobs"] if job["outcome"] == "stopped"})
        return result

    def stopped_by_watchdog(self, job_name: str) -> dict[str, Any] | None:
        """What the watchdog reported (and published) when it stopped `job_name`, once any sweep under way has ended
        (a stopped job can end before the sweep that stopped it); None when it did not stop it."""
        with self._watchdog_lock:
            return self._watchdog_stops.get(job_name)

    def _sweep_failed(self, error: Exception) -> None:
        self.watchdog_errors.append(f"{type(error).__name__}: {error}")

    def wait(self, job_name: str, *, timeout: float = 600,
             on_description: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
        """Poll DescribeTrainingJob as a client does until the job ends; `on_description` sees every answer."""
        return wait_for_job(self.sagemaker, job_name, timeout=timeout, on_description=on_description)


def wait_for_tuning_job(sagemaker: Any, name: str, *, timeout: float = 3600) -> dict[str, Any]:
    """Poll DescribeHyperParameterTuningJob on `sagemaker` until the tuning job ends; returns the last answer."""
    deadline = time.monotonic() + timeout
    while True:
        description = sagemaker.describe_hyper_parameter_tuning_job(HyperParameterTuningJobName=name)
        if description["HyperParameterTuningJobStatus"] in TERMINAL_TUNING_STATUSES:
            return description
        if time.monotonic() > deadline:
            raise TimeoutError(f"tuning job {name} still {description['HyperParameterTuningJobStatus']} after "
                               f"{timeout:.0f} s: stop it, or wait with a larger timeout")
        time.sleep(POLL_SECONDS)


def wait_for_job(sagemaker: Any, job_name: str, *, timeout: float = 600,
                 on_description: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Poll DescribeTrainingJob on `sagemaker` (any SageMaker client) until the job ends; returns the last answer."""
    deadline = time.monotonic() + timeout
    while True:
        description = sagemaker.describe_training_job(TrainingJobName=job_name)
        if on_description:
            on_description(description)
        if description["TrainingJobStatus"] in TERMINAL_STATUSES:
            return description
        if time.monotonic() > deadline:
            raise TimeoutError(f"training job {job_name} still {description.get('SecondaryStatus', description['TrainingJobStatus'])} after "
                               f"{timeout:.0f} s: stop it, or wait with a larger timeout")
        time.sleep(POLL_SECONDS)
