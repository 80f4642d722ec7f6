"""The pipeline's configuration: one frozen, validated object built from CDK context by app.py.

Defaults live in cdk.json (`context.pipeline`), named environments (`context.environments.<env>`) override
them, and `-c key=value` on the command line overrides both. Every error names the key, the bad value and
what is allowed, so a typo fails synthesis instead of a training job hours later. Which container, distribution
and instance go together comes from the training code's table of container profiles, which the trigger's
preflight also reads; left unset, framework_version, python_version and instance_type follow the distribution.
"""

from __future__ import annotations

import difflib
import functools
import json
import re
from collections.abc import Mapping
from typing import Any, Literal

import botocore.session
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from stacks.model_metrics import model_quality_metrics, project_metric_names
from stacks.source_layout import Member, SourceLayoutError, bundle_members, project_path
from stacks.training_code_modules import TRAINING_CODE_DIR, training_code_module
from stacks.trigger_modules import trigger_module

profiles = training_code_module("sagemaker_distributed/container_profiles.py")
job_environment = training_code_module("sagemaker_distributed/job_environment.py")
job_names = trigger_module("job_names.py")
experiment_tracking = trigger_module("experiment_tracking.py")
health_check = trigger_module("health_check.py")

# SageMaker's managed spot and warm pools cap a job at 28 days.
_MAX_JOB_SECONDS = 28 * 24 * 3600
# CloudWatch Logs accepts only these retention periods.
LOG_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922,
                       3288, 3653)
_BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
# The project's own entry points in training_code/: their hyperparameters are checked against their flags.
PROJECT_ENTRY_POINTS = ("train_ddp.py", "train_lightning.py")


class ConfigError(ValueError):
    """A configuration value that synthesis refuses; the message names key, value and what is allowed."""

    def __init__(self, message: str, problems: list[str] | None = None):
        super().__init__(message)
        self.problems = problems if problems is not None else [message]


REFUSAL_HEADER = "invalid pipeline configuration (cdk.json context or -c key=value):"
# How much of a refused value a message repeats: enough to recognise it, never a whole object.
_SHOWN_CHARACTERS = 80


def refused(problems: list[str]) -> ConfigError:
    """One ConfigError listing every problem, one line each."""
    return ConfigError("\n  ".join([REFUSAL_HEADER, *problems]), problems)


def did_you_mean(value: str, choices: list[str]) -> str:
    """` (did you mean 'x'?)` for the closest of `choices`, or nothing."""
    close = difflib.get_close_matches(value, choices, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


class RegistrationThreshold(BaseModel):
    """The least a model must score on one metric to be registered."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    metric: str = Field(min_length=1)
    minimum: float = Field(allow_inf_nan=False)


class MetricDefinition(BaseModel):
    """One metric SageMaker reads from a job's log lines: the first group of `Regex` is its value."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    Name: str = Field(min_length=1, max_length=255)
    Regex: str = Field(min_length=1, max_length=500)


class PipelineConfig(BaseModel):
    """Everything the stacks need to know; docs/configuration.md is generated from these fields."""

    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=True)

    env_name: Literal["dev", "prod"] = Field(
        description="named environment from cdk.json's `environments`, selected with `-c env=...` (default `dev`)")
    project_prefix: str = Field(pattern=r"^[a-z][a-z0-9-]{1,30}[a-z0-9]$",
                                description="prefix of stack names and training and tuning job names (`<prefix>-...`); "
                                            "the trigger's IAM permissions are scoped to jobs named `<prefix>-*`; at "
                                            f"most {job_names.longest_tuning_prefix()} characters, so that every "
                                            f"tuning job name fits SageMaker's {job_names.MAX_TUNING_LENGTH}")
    region: str = Field(pattern=r"^[a-z]{2}(-gov)?-[a-z]+-\d$",
                        description="AWS region of both stacks and of the AWS PyTorch DLC; the account comes from "
                                    "your credentials")
    dataset_prefix: str = Field(pattern=r"^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*/$",
                                description="key prefix of datasets in the data bucket "
                                            "(`<prefix><name>/<version>/<channel>/...`); ends with `/`")
    marker_names: tuple[str, ...] = Field(min_length=1,
                                          description="file names that mark a dataset version complete, at the "
                                                      "version root (`-c marker_names=a,b`)")
    source_dir: str = Field(
        default="training_code", min_length=1,
        description="the training code: the folder packed as each job's `sourcedir.tar.gz` (SageMaker's "
                    "`source_dir`; its `requirements.txt` is installed before launch), relative to the project root "
                    "or absolute")
    entry_point: str = Field(
        description="default training script: the path of a file inside `source_dir` (`train.py`, "
                    "`scripts/train.py`); a manifest.json or manual payload may name another file of the bundle")
    dependencies: tuple[str, ...] = Field(
        default=("training_code/sagemaker_distributed",),
        description="extra folders packed at the archive root beside `source_dir`'s contents, each under its own "
                    "folder name, as SageMaker SDK v2's `PyTorch(dependencies=[...])` does (relative to the project "
                    "root or absolute; `-c dependencies=a,b`); one that already sits at that place inside "
                    "`source_dir` is packed once")
    metric_definitions: tuple[MetricDefinition, ...] | None = Field(
        default=None, max_length=40,
        description="the jobs' `MetricDefinitions`, a JSON list of `{\"Name\": ..., \"Regex\": ...}` (at most 40; "
                    "JSON with `-c`); unset: the metrics the project's training code prints "
                    "(training_code/ranker/log_format.py)")
    distribution: str = Field(
        description="default SageMaker distribution: `torch_distributed` (torchrun), `pytorchddp` / `smdistributed` "
                    "(SMDDP: the AWS DLC up to PyTorch 2.2.0 only) or `none` (one process per host)")
    launch: str = Field(
        default="toolkit",
        description="how a job's container starts the entry point: `toolkit` (the image's SageMaker training toolkit, "
                    "as SDK v2's `PyTorch` estimator; every distribution) or `model_trainer` (the drivers SDK v3's "
                    "`ModelTrainer` ships, for `none` and `torch_distributed`, with the request ModelTrainer sends; "
                    "docs/trigger.md, Launch); a manifest.json or manual payload may choose per job")
    # Derived fields default to None so that, when `distribution` is bad and cannot derive them, the one message is
    # about `distribution` (a valid one always fills them: _container_defaults).
    instance_type: str = Field(default=None,
                               description="default SageMaker instance type, one SageMaker trains on (the same check "
                                           "as a manifest's `instance_type`); unset, it follows `distribution` "
                                           "(docs/container-profiles.md); `torch_distributed` needs a GPU type and "
                                           "starts one process per GPU")
    instance_count: int = Field(ge=1, le=100, description="default number of training instances")
    max_instance_count: int = Field(
        default=4, ge=1, le=100,
        description="cost ceiling: the most instances one training job may ask for (the default instance_count, a "
                    "dataset's manifest.json or a manual payload); a request above it is refused before any job "
                    "starts")
    framework_version: str = Field(default=None, pattern=r"^\d+\.\d+(\.\d+)?$",
                                   description="PyTorch version of the AWS DLC the jobs run in; unset, it follows "
                                               "`distribution` (docs/container-profiles.md)")
    python_version: str = Field(default=None, pattern=r"^py3\d{1,2}$", description="Python version tag of the DLC, e.g. `py310`; unset, the "
                                             "framework version's own")
    default_hyperparameters: dict[str, str | int | float | bool] = Field(
        default_factory=dict,
        description="hyperparameters sent with every job, under the manifest's and a manual payload's (no "
                    "`sagemaker_*` keys; JSON with `-c`); none by default, so the entry point's own defaults hold "
                    "(the ranker's flags are listed in docs/training.md) and a script of your own gets no "
                    "flags it does not define")
    default_environment: dict[str, str] = Field(
        default_factory=dict,
        description="environment variables of every process of every job (CreateTrainingJob's `Environment`, SDK "
                    "v2's `PyTorch(environment=...)`), under a manifest's and a manual payload's `environment`, "
                    "e.g. `{\"SAGEMAKER_DISTRIBUTED_COLLECTIVE_TIMEOUT\": \"3600\"}` (JSON with `-c`); checked "
                    "against SageMaker's limits and refused for names the platform sets itself (docs/trigger.md, "
                    "Environment)")
    train_data_distribution: str = Field(
        default="FullyReplicated",
        description="how SageMaker spreads the `train` channel's objects over a job's instances: `FullyReplicated` "
                    "(every instance downloads all of them) or `ShardedByS3Key` (each about 1/N of them, for "
                    "datasets too large to copy to every instance; docs/large-datasets.md); `validation` and `test` "
                    "are always replicated; a manifest.json or manual payload may choose per job")
    image_source: Literal["dlc", "custom"] = Field(
        description="`dlc`: the AWS PyTorch DLC, resolved offline at synthesis; `custom`: the project's ECR image")
    custom_image_tag: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$",
                                         description="tag in the project's ECR repository; required with "
                                                     "`image_source=custom`")
    input_mode: Literal["File", "FastFile"] = Field(description="how SageMaker provides the channels to the job")
    volume_size_gb: int = Field(ge=1, le=16384, description="training volume size per instance, in GB")
    max_runtime_seconds: int = Field(ge=60, le=_MAX_JOB_SECONDS,
                                     description="stopping condition: the longest a job may train, in seconds")
    max_runtime_ceiling_seconds: int = Field(
        default=3 * 24 * 3600, ge=60, le=_MAX_JOB_SECONDS,
        description="cost ceiling: the longest max_runtime (seconds) a manifest.json or manual payload may ask for; "
                    "max_runtime_seconds must not exceed it")
    use_spot: bool = Field(description="managed spot training (jobs resume from their checkpoints)")
    tensorboard: bool = Field(
        default=False,
        description="every job uploads the TensorBoard logs train_lightning.py writes while it runs, where the "
                    "image has tensorboard or tensorboardX (SageMaker's `TensorBoardOutputConfig`, to `tensorboard/` "
                    "beside the job's model artifacts); a manifest.json or manual payload's `tensorboard` overrides "
                    "it per job")
    max_wait_seconds: int = Field(ge=0, le=_MAX_JOB_SECONDS,
                                  description="with spot, the longest a job may wait and train in all: at least "
                                              "`max_runtime_seconds`")
    keep_alive_seconds: int = Field(ge=0, le=3600,
                                    description="warm pool keep-alive after a job (0: off); not with spot")
    job_retry_attempts: int = Field(ge=0, le=30,
                                    description="SageMaker `RetryStrategy` attempts after an internal failure "
                                                "(0: none)")
    mlflow_resource_arn: str | None = Field(
        default=None,
        description="ARN of a SageMaker managed MLflow tracking server or MLflow app in the stack's region "
                    "(`arn:aws:sagemaker:<region>:<account>:mlflow-tracking-server/<name>` or `...:mlflow-app/<id>`): "
                    "every job logs its parameters, validation metrics, final metrics and model location to a run "
                    "named after the job, in the experiment `<project_prefix>-<dataset>` (SageMaker's "
                    "`MlflowConfig`), and the execution role may use that server and no other; unset: no tracking "
                    "(docs/experiment-tracking.md)")
    infra_check: Literal["multi_instance", "always", "never"] = Field(
        default="multi_instance",
        description="which jobs run SageMaker's cluster health check (instance hardware and the network between "
                    "instances) before their code (`InfraCheckConfig`): `multi_instance` jobs of two or more "
                    "instances, `always`, or `never`; a manifest.json or manual payload's `infra_check` overrides it "
                    "per job (docs/reliability.md, Cluster health check)")
    tuning_strategy: Literal["Bayesian", "Random", "Hyperband", "Grid"] = Field(
        default="Bayesian",
        description="default search strategy of a `tuning` section (docs/tuning.md): SageMaker's `Bayesian`, "
                    "`Random`, `Hyperband` or `Grid`")
    tuning_max_jobs: int = Field(
        default=10, ge=1, le=500,
        description="default number of training jobs (trials) one tuning job may start")
    tuning_max_parallel_jobs: int = Field(
        default=2, ge=1, le=100,
        description="default number of trials one tuning job runs at once; at most `tuning_max_jobs`")
    tuning_early_stopping: Literal["Off", "Auto"] = Field(
        default="Off",
        description="default early stopping of a tuning job's trials: `Auto` lets SageMaker stop trials unlikely to "
                    "beat the best so far")
    max_tuning_instance_hours: int = Field(
        default=960, ge=1, le=1_000_000,
        description="cost ceiling of a tuning job: its max_jobs x instance_count x max_runtime, in instance-hours "
                    "(every trial on all its instances for its whole max_runtime); a tuning job above it is "
                    "refused before it starts")
    extra_data_buckets: tuple[str, ...] = Field(
        default=(),
        description="names of existing S3 buckets, besides the project's data bucket, that channels of a manual "
                    "payload may point into; training jobs get read access to them (and nothing else); a bucket "
                    "encrypted with a customer KMS key must also let the training role decrypt")
    subnet_ids: tuple[str, ...] = Field(default=(), description="VPC subnets for the jobs, with "
                                                                "`security_group_ids` (empty: no VPC)")
    security_group_ids: tuple[str, ...] = Field(default=(), description="VPC security groups for the jobs, with "
                                                                        "`subnet_ids`")
    enable_kms: bool = Field(
        description="the project KMS key encrypts buckets, ECR, the trigger's queue and logs, and job volumes and "
                    "output (off: AWS-managed encryption; the notification topic always uses the key)")
    enable_network_isolation: bool = Field(
        description="job containers without network access: the code arrives as the `code` input channel, which "
                    "the execution role may list and read and nothing beside it (use `image_source=custom`: the "
                    "DLC installs the training code's requirements at start)")
    enable_inter_container_encryption: bool = Field(
        description="encrypt traffic between training instances; with `subnet_ids`, the `security_group_ids` must "
                    "allow UDP port 500 and IP protocol 50 (ESP), inbound and outbound, from the group itself "
                    "(docs/security.md), which the pipeline cannot see or check")
    notification_email: str | None = Field(default=None, pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$",
                                           description="e-mail address subscribed to job notifications")
    retrain_schedule: str | None = Field(default=None, pattern=r"^(rate|cron)\(.+\)$",
                                         description="EventBridge `rate(...)` / `cron(...)` that retrains on the "
                                                     "newest complete dataset version at every tick, also when no "
                                                     "new version arrived (docs/trigger.md, Idempotency)")
    removal_policy: Literal["destroy", "retain"] = Field(
        description="`destroy`: buckets, key and repository are emptied and deleted with the stack; `retain`: "
                    "they survive it")
    trigger_reserved_concurrency: int | None = Field(
        default=None, ge=1, le=100,
        description="opt-in reserved concurrency of the trigger Lambda (unset: none, it shares the account's "
                    "unreserved pool); Lambda keeps 100 of an account's concurrency unreserved, so a reservation "
                    "fails to deploy where the account's quota is low, as on new accounts")
    trigger_timeout_seconds: int = Field(ge=10, le=900, description="trigger Lambda timeout, in seconds")
    trigger_retry_attempts: int = Field(ge=0, le=2, description="Lambda's asynchronous retries of a failed "
                                                                "trigger invocation before the dead-letter queue")
    trigger_max_event_age_seconds: int = Field(ge=60, le=21600,
                                               description="age in seconds after which an undelivered event goes "
                                                           "to the dead-letter queue")
    registration_threshold: RegistrationThreshold | None = Field(
        default=None,
        description="register a completed job's model only when its final `metric` (one of the jobs' metrics "
                    "where higher is better, e.g. `val_ndcg@k`, `test_ndcg@k`) is at least `minimum`, e.g. `{\"metric\": \"test_ndcg@10\", \"minimum\": "
                    "0.7}` (JSON with `-c`); a model below it, or without that metric, is not registered and the "
                    "notification says why; unset: every completed job's model is registered "
                    "(docs/model-registry.md)")
    stall_watchdog: bool = Field(
        default=True,
        description="deploy the stalled-job watchdog: a Lambda that every `stall_check_minutes` stops the project's "
                    "training jobs in SageMaker's `Training` status whose every host has logged nothing for "
                    "`stall_minutes`, and tells the notification topic which host fell silent when "
                    "(docs/reliability.md); off: a hung job runs until `max_runtime_seconds`")
    stall_minutes: int = Field(
        default=60, ge=10, le=1440,
        description="how long a training job's logs may stay silent, on every host, before the watchdog stops it: "
                    "above the longest quiet phase of your script (a long evaluation or checkpoint that prints "
                    "nothing) and above the collective timeout (`SAGEMAKER_DISTRIBUTED_COLLECTIVE_TIMEOUT`, 30 min), "
                    "so that a rank stuck in a collective fails the job with its own reason first")
    stall_check_minutes: int = Field(
        default=10, ge=1, le=60,
        description="how often the watchdog looks, in minutes (its EventBridge schedule): a hung job is stopped "
                    "at most `stall_minutes` + `stall_check_minutes` after its last log line")
    log_retention_days: int = Field(description="days the Lambdas' CloudWatch logs and the buckets' S3 server "
                                                "access logs are kept, one of the periods CloudWatch Logs allows")
    noncurrent_version_expiration_days: int = Field(ge=1, le=3650,
                                                    description="days old object versions are kept in the buckets")
    ecr_images_to_keep: int = Field(ge=1, le=1000, description="newest images kept in the ECR repository")
    inference_instance_type: str = Field(
        pattern=r"^ml\.[a-z0-9-]+\.[a-z0-9]+$",
        description="instance type a registered model package is made for: its CPU or GPU PyTorch inference image "
                    "and its supported real-time and batch transform instance type (docs/model-registry.md)")

    @model_validator(mode="before")
    @classmethod
    def _container_defaults(cls, data: Any) -> Any:
        """Unset framework_version, python_version and instance_type follow the distribution."""
        if not isinstance(data, dict) or data.get("distribution") not in profiles.DISTRIBUTIONS:
            return data
        distribution = data["distribution"]
        filled = dict(data)
        if filled.get("framework_version") is None:
            filled["framework_version"] = profiles.default_profile(distribution).framework_version
        profile = profiles.profile_named(str(filled["framework_version"]))
        if profile is None:
            raise ValueError("; ".join(profiles.framework_errors(str(filled["framework_version"]), "")))
        if filled.get("python_version") is None:
            filled["python_version"] = profile.python_version
        if filled.get("instance_type") is None:
            filled["instance_type"] = profiles.DEFAULT_INSTANCE_TYPES[distribution]
        return filled

    @field_validator("project_prefix")
    @classmethod
    def _names_tuning_jobs(cls, prefix: str) -> str:
        """The trigger names tuning jobs `<prefix>-<dataset, cut>-<a part of their own>` (job_names.py): a longer
        prefix would have every tuning job refused."""
        longest = job_names.longest_tuning_prefix()
        if len(prefix) > longest:
            raise ValueError(f"{len(prefix)} characters leave no room in a tuning job's name, which SageMaker allows "
                             f"{job_names.MAX_TUNING_LENGTH} characters (CreateHyperParameterTuningJob) and the "
                             f"trigger writes <prefix>-<dataset>-<a part of its own>: use at most {longest}")
        return prefix

    @field_validator("distribution")
    @classmethod
    def _known_distribution(cls, distribution: str) -> str:
        if distribution not in profiles.DISTRIBUTIONS:
            raise ValueError(f"use one of {list(profiles.DISTRIBUTIONS)}")
        return distribution

    @field_validator("instance_type")
    @classmethod
    def _training_instance_type(cls, instance_type: str) -> str:
        """The trigger's rule for a manifest's or payload's instance type (container_profiles.instance_type_errors),
        against the training instance types of this botocore's SageMaker model."""
        errors = profiles.instance_type_errors(instance_type, "instance_type",
                                               sagemaker_model().shape_for("TrainingInstanceType").enum)
        if errors:
            raise ValueError("; ".join(errors))
        return instance_type

    @field_validator("marker_names", mode="before")
    @classmethod
    def _split_marker_names(cls, value: Any) -> Any:
        return _split_csv(value)

    @field_validator("subnet_ids", "security_group_ids", "extra_data_buckets", mode="before")
    @classmethod
    def _split_ids(cls, value: Any) -> Any:
        return _split_csv(value)

    @field_validator("dependencies", mode="before")
    @classmethod
    def _split_dependencies(cls, value: Any) -> Any:
        return _split_csv(value)

    @field_validator("train_data_distribution")
    @classmethod
    def _known_data_distribution(cls, value: str) -> str:
        allowed = sagemaker_model().shape_for("S3DataDistribution").enum
        if value not in allowed:
            raise ValueError(f"use one of {list(allowed)}")
        return value

    @field_validator("default_hyperparameters", "default_environment", "metric_definitions", "registration_threshold",
                     mode="before")
    @classmethod
    def _parse_json(cls, value: Any) -> Any:
        """`-c default_hyperparameters='{"epochs": 3}'` (or any object- or list-valued key) arrives as a JSON string."""
        return json.loads(value) if isinstance(value, str) else value

    @field_validator("marker_names")
    @classmethod
    def _plain_file_names(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        for name in names:
            if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
                raise ValueError(f"{name!r} is not a plain file name (letters, digits, '_', '.', '-')")
        return names

    @field_validator("subnet_ids")
    @classmethod
    def _subnet_ids(cls, ids: tuple[str, ...]) -> tuple[str, ...]:
        return _ids_with_prefix(ids, "subnet-")

    @field_validator("security_group_ids")
    @classmethod
    def _security_group_ids(cls, ids: tuple[str, ...]) -> tuple[str, ...]:
        return _ids_with_prefix(ids, "sg-")

    @field_validator("extra_data_buckets")
    @classmethod
    def _bucket_names(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        for name in names:
            if not _BUCKET_NAME.fullmatch(name) or ".." in name:
                raise ValueError(f"{name!r} is not an S3 bucket name (3-63 lowercase letters, digits, '.' and '-', "
                                 f"starting and ending with a letter or digit): give the bare name, without s3://")
        return names

    @field_validator("default_hyperparameters")
    @classmethod
    def _no_reserved_hyperparameters(cls, hyperparameters: dict[str, Any]) -> dict[str, Any]:
        reserved = sorted(key for key in hyperparameters if key.startswith("sagemaker_"))
        if reserved:
            raise ValueError(f"{reserved} are set by the pipeline itself; remove the 'sagemaker_' keys")
        return hyperparameters

    @field_validator("log_retention_days")
    @classmethod
    def _known_retention(cls, days: int) -> int:
        if days not in LOG_RETENTION_DAYS:
            raise ValueError(f"CloudWatch Logs allows only {list(LOG_RETENTION_DAYS)}")
        return days

    @model_validator(mode="after")
    def _consistent(self) -> PipelineConfig:
        _require(not self.use_spot or self.max_wait_seconds >= self.max_runtime_seconds, "max_wait_seconds",
                 self.max_wait_seconds, f"with use_spot, at least max_runtime_seconds ({self.max_runtime_seconds})")
        _require(not (self.use_spot and self.keep_alive_seconds), "keep_alive_seconds", self.keep_alive_seconds,
                 "0 with use_spot: SageMaker warm pools do not work with managed spot training")
        _require(self.instance_count <= self.max_instance_count, "instance_count", self.instance_count,
                 f"at most max_instance_count ({self.max_instance_count}), the pipeline's cost ceiling; or raise it")
        _require(self.max_runtime_seconds <= self.max_runtime_ceiling_seconds, "max_runtime_seconds",
                 self.max_runtime_seconds, f"at most max_runtime_ceiling_seconds ({self.max_runtime_ceiling_seconds}), "
                 f"the pipeline's cost ceiling; or raise it")
        _require(self.tuning_max_parallel_jobs <= self.tuning_max_jobs, "tuning_max_parallel_jobs",
                 self.tuning_max_parallel_jobs, f"at most tuning_max_jobs ({self.tuning_max_jobs})")
        _require(bool(self.subnet_ids) == bool(self.security_group_ids), "subnet_ids/security_group_ids",
                 f"{list(self.subnet_ids)}/{list(self.security_group_ids)}", "both set (VPC) or both empty (no VPC)")
        _require(self.stall_check_minutes <= self.stall_minutes, "stall_check_minutes", self.stall_check_minutes,
                 f"at most stall_minutes ({self.stall_minutes}): the watchdog must look at least once per allowed "
                 f"silence")
        _require(self.image_source != "custom" or self.custom_image_tag is not None, "custom_image_tag",
                 self.custom_image_tag, "a tag pushed to the project's ECR repository when image_source is 'custom'")
        if self.registration_threshold is not None:
            quality = self.model_quality_metrics
            _require(self.registration_threshold.metric in quality, "registration_threshold.metric",
                     self.registration_threshold.metric, f"one of the jobs' model metrics {list(quality)}")
        if self.mlflow_resource_arn is not None:
            arn_errors = experiment_tracking.resource_arn_errors(
                self.mlflow_resource_arn, "mlflow_resource_arn", region=self.region,
                arn_pattern=sagemaker_model().shape_for("MlflowConfig").members["MlflowResourceArn"].metadata["pattern"])
            arn_errors += [f"default_environment.{name} is set by the pipeline from mlflow_resource_arn: remove it"
                           for name in experiment_tracking.TRACKING_VARIABLES if name in self.default_environment]
            if self.enable_network_isolation:
                # CreateTrainingJob's EnableNetworkIsolation: no outbound calls from the training container.
                arn_errors.append("mlflow_resource_arn with enable_network_isolation=true: an isolated job's container "
                                  "can make no network calls, so its run could not reach the tracking server: unset "
                                  "one of them")
            if arn_errors:
                raise ValueError("; ".join(arn_errors))
        # The names and limits the trigger checks every job against, for the distribution default jobs run.
        environment_errors = job_environment.environment_errors(
            self.default_environment, "default_environment", distribution=self.distribution,
            limits=job_environment.create_training_job_limits(sagemaker_model()))
        if environment_errors:
            raise ValueError("; ".join(environment_errors))
        container_errors = profiles.framework_errors(self.framework_version, self.python_version)
        container_errors += profiles.distribution_errors(
            distribution=self.distribution, instance_type=self.instance_type,
            framework_version=self.framework_version, image_source=self.image_source)
        if container_errors:
            raise ValueError("; ".join(container_errors))
        return self

    @model_validator(mode="after")
    def _training_code_layout(self) -> PipelineConfig:
        try:
            members = self.source_members()
        except SourceLayoutError as error:
            raise ValueError(str(error)) from None
        if self.entry_point not in members:
            scripts = [name for name in members if "/" not in name and name.endswith((".py", ".sh"))]
            raise ValueError(f"entry_point={self.entry_point!r} is not a file of source_dir={self.source_dir!r} "
                             f"({project_path(self.source_dir)}): give the path of the training script inside "
                             f"source_dir, e.g. -c entry_point=train.py; scripts at its top: {scripts}")
        launch_errors = profiles.launch_errors(launch=self.launch, distribution=self.distribution,
                                               entry_point=self.entry_point, files=members)
        if launch_errors:
            raise ValueError("; ".join(launch_errors))
        if self.runs_project_entry_point:
            _check_ranker_hyperparameters(self.default_hyperparameters)
        return self

    @property
    def runs_project_entry_point(self) -> bool:
        """The default job runs one of the project's own scripts, whose flags the training code defines."""
        return (project_path(self.source_dir) == TRAINING_CODE_DIR
                and self.entry_point in PROJECT_ENTRY_POINTS)

    def source_members(self) -> dict[str, Member]:
        """The job bundle's files by archive name: `source_dir`'s contents plus `dependencies`, and the tracking
        requirements where the stack tracks experiments."""
        return bundle_members(project_path(self.source_dir),
                              tuple(project_path(dependency) for dependency in self.dependencies),
                              tracking=self.mlflow_resource_arn is not None)

    @property
    def model_quality_metrics(self) -> tuple[str, ...]:
        """The jobs' metrics that describe the model (`metric_definitions`, else the training code's)."""
        names = ([definition.Name for definition in self.metric_definitions] if self.metric_definitions is not None
                 else project_metric_names())
        return model_quality_metrics(names)

    @property
    def uses_vpc(self) -> bool:
        return bool(self.subnet_ids)

    @property
    def is_production(self) -> bool:
        return self.env_name == "prod"


@functools.cache
def sagemaker_model() -> Any:
    """botocore's SageMaker API model, read offline: the limits CreateTrainingJob documents."""
    return botocore.session.get_session().get_service_model("sagemaker")


def build_config(*, env_name: str, defaults: Mapping[str, Any], environments: Mapping[str, Mapping[str, Any]],
                 overrides: Mapping[str, Any]) -> PipelineConfig:
    """Merge cdk.json defaults, the named environment and command-line overrides, then validate."""
    if env_name not in environments:
        raise refused([f"env={env_name!r} is not a named environment{did_you_mean(env_name, list(environments))}: "
                       f"use one of {sorted(environments)} (cdk.json's environments)"])
    merged = {**defaults, **environments[env_name], **overrides, "env_name": env_name}
    try:
        return PipelineConfig(**merged)
    except ValidationError as error:
        raise refused(validation_problems(error)) from None


def validation_problems(error: ValidationError) -> list[str]:
    """One line per bad key, naming it, its value (cut short) and what is allowed."""
    lines: dict[str, str] = {}
    for problem in error.errors():
        key = ".".join(str(part) for part in problem["loc"])
        message = problem["msg"].removeprefix("Value error, ")
        if problem["type"] == "missing":
            line = f"{key} is required: set it in cdk.json's context or with -c {key}=..."
        elif problem["type"] == "extra_forbidden":
            line = (f"{key} is not a configuration key{did_you_mean(key, list(PipelineConfig.model_fields))}: "
                    f"the keys are listed in docs/configuration.md")
        elif not key or message.startswith(f"{key}="):
            line = message  # a rule over several keys, or one that names its key and value itself
        else:
            line = f"{key}={_shown(problem.get('input'))}: {message}"
        # A key's first problem is the one to fix; what follows from it would only repeat it.
        lines.setdefault(key or line, line)
    return list(lines.values())


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARACTERS else f"{text[:_SHOWN_CHARACTERS]}...({len(text)} characters)"


def _check_ranker_hyperparameters(hyperparameters: Mapping[str, Any]) -> None:
    """The project's scripts parse `hyperparameters` as SageMaker's toolkit passes them (`--name value`, the value's
    text), so a default every job would fail on stops synthesis instead, with the scripts' own message."""
    flags = [text for name, value in hyperparameters.items() for text in (f"--{name}", str(value))]
    try:
        # Any existing folder stands in for the training channel, which each job gets from its dataset.
        training_code_module("ranker/config.py").parse_config(["--train", str(TRAINING_CODE_DIR), *flags], env={})
    except ValueError as error:
        raise ValueError(f"default_hyperparameters={dict(hyperparameters)!r}: the training scripts refuse it "
                         f"({error}); fix or remove it") from None


def _require(ok: bool, key: str, value: Any, allowed: str) -> None:
    if not ok:
        raise ValueError(f"{key}={value!r} is not allowed: use {allowed}")


def _split_csv(value: Any) -> Any:
    """`-c key=a,b` arrives as one string; cdk.json holds a list."""
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return value


def _ids_with_prefix(ids: tuple[str, ...], prefix: str) -> tuple[str, ...]:
    for resource_id in ids:
        if not re.fullmatch(re.escape(prefix) + r"[0-9a-f]{8,17}", resource_id):
            raise ValueError(f"{resource_id!r} is not an id like '{prefix}0123456789abcdef0'")
    return ids
