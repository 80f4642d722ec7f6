"""Per-job overrides of the stack's defaults, from a manual payload or a dataset's manifest.json.

Validated field by field (no pydantic: the bundle must stay pure Python), so a rejection names every bad field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from training_trigger.errors import InvalidInput
from training_trigger.container_profiles import DISTRIBUTIONS, LAUNCHES
from training_trigger.job_environment import environment_type_errors
from training_trigger.limits import (
    ceiling_errors,
    hyperparameter_key_errors,
    instance_type_errors,
    s3_data_distributions,
    shown,
    tag_errors,
)
from training_trigger.settings import Settings

HyperparameterValue = str | int | float | bool
# CreateTrainingJob's MlflowConfig.MlflowExperimentName (botocore's model: 1 to 256 characters of any kind).
MAX_EXPERIMENT_NAME_LENGTH = 256
RESERVED_HYPERPARAMETER_PREFIX = "sagemaker_"

# The tags the trigger adds to every job it starts (provenance), which overrides may neither repeat nor crowd out.
TRIGGER_TAG_KEYS = ("trigger-source", "dataset", "dataset-version", "marker-etag")
OVERRIDE_FIELDS = ("entry_point", "distribution", "instance_type", "instance_count", "hyperparameters", "spot",
                   "max_runtime", "tags", "tensorboard", "environment", "train_data_distribution", "launch",
                   "infra_check", "mlflow_experiment_name")


@dataclass(frozen=True)
class JobOverrides:
    """Each field None (or empty) means "use the stack's default"."""

    entry_point: str | None = None
    """The script to run: the path of a file in the training code bundle (`source_dir`), e.g. `train_ddp.py`;
    default: the stack's `entry_point`."""
    distribution: str | None = None
    """`torch_distributed`, `pytorchddp`, `smdistributed` or `none`; default: the stack's `distribution`."""
    instance_type: str | None = None
    """A SageMaker `ml.*` instance type; default: the stack's `instance_type`."""
    instance_count: int | None = None
    """Number of instances, a positive whole number; default: the stack's `instance_count`."""
    hyperparameters: Mapping[str, HyperparameterValue] = field(default_factory=dict)
    """Strings, numbers or booleans by flag name (e.g. `epochs`, `batch-size`), merged key by key over the stack's
    `default_hyperparameters`; `sagemaker_*` keys are refused. For the project's own `train_ddp.py` and
    `train_lightning.py` each name and value is checked against the scripts' flags; other scripts get them as
    given."""
    spot: bool | None = None
    """Managed spot training; default: the stack's `use_spot`."""
    max_runtime: int | None = None
    """Stopping condition in seconds; default: the stack's `max_runtime_seconds`."""
    tags: Mapping[str, str] = field(default_factory=dict)
    """String tags added to the job's tags, merged key by key."""
    tensorboard: bool | None = None
    """Upload the job's TensorBoard logs while it runs (SageMaker's `TensorBoardOutputConfig`, to `tensorboard/`
    beside the job's model artifacts); default: the stack's `tensorboard` setting (off)."""
    environment: Mapping[str, str] = field(default_factory=dict)
    """Environment variables of every process of the job, strings by name (e.g. `{"NCCL_DEBUG": "INFO"}`), merged
    key by key over the stack's `default_environment`; names the platform sets itself (`SM_*`, `SAGEMAKER_*`, the
    launchers' ranks, ...) are refused, with the reason, except the ones `sagemaker_distributed` reads for you
    (`SAGEMAKER_DISTRIBUTED_COLLECTIVE_TIMEOUT`; docs/trigger.md, Environment)."""
    train_data_distribution: str | None = None
    """How SageMaker spreads the `train` channel's objects over the instances: `FullyReplicated` (every instance
    downloads all of them) or `ShardedByS3Key` (each instance about 1/N of the objects); `validation` and `test`
    are always replicated; default: the stack's `train_data_distribution`."""
    launch: str | None = None
    """How the container starts `entry_point`: `toolkit` (the image's SageMaker training toolkit, as SDK v2's
    `PyTorch` estimator) or `model_trainer` (SDK v3's `ModelTrainer` drivers; distributions `none` and
    `torch_distributed` only; docs/trigger.md, Launch); default: the stack's `launch`."""
    infra_check: bool | None = None
    """Run SageMaker's cluster health check (instance hardware and the network between instances) before the job's
    code (`InfraCheckConfig`; docs/reliability.md); default: the stack's `infra_check` (jobs of two or more
    instances)."""
    mlflow_experiment_name: str | None = None
    """The MLflow experiment the job's run goes to, at most 256 characters; default: `<project_prefix>-<dataset>`.
    Needs the stack's `mlflow_resource_arn` (docs/experiment-tracking.md)."""

    def then(self, later: JobOverrides) -> JobOverrides:
        """These overrides with `later`'s on top (hyperparameters and tags merge key by key)."""
        def pick(name: str) -> Any:
            value = getattr(later, name)
            return getattr(self, name) if value is None else value

        return JobOverrides(
            entry_point=pick("entry_point"),
            distribution=pick("distribution"),
            instance_type=pick("instance_type"),
            instance_count=pick("instance_count"),
            hyperparameters={**self.hyperparameters, **later.hyperparameters},
            spot=pick("spot"),
            max_runtime=pick("max_runtime"),
            tags={**self.tags, **later.tags},
            tensorboard=pick("tensorboard"),
            environment={**self.environment, **later.environment},
            train_data_distribution=pick("train_data_distribution"),
            launch=pick("launch"),
            infra_check=pick("infra_check"),
            mlflow_experiment_name=pick("mlflow_experiment_name"),
        )


def check_hyperparameters(value: Any, where: str) -> list[str]:
    """Errors for a hyperparameter mapping: names SageMaker accepts, scalar values only, and no product-owned
    `sagemaker_*` keys."""
    if not isinstance(value, Mapping):
        return [f"{where}={value!r} is not an object: give hyperparameters as {{\"epochs\": 10}}"]
    errors = []
    for key, item in value.items():
        errors += hyperparameter_key_errors(key, where)
        if key.startswith(RESERVED_HYPERPARAMETER_PREFIX):
            errors.append(f"{where}.{key} is set by the trigger itself and may not be overridden: remove it "
                          f"(use the entry_point / distribution fields instead)")
        elif item is None or not isinstance(item, HyperparameterValue):
            errors.append(f"{where}.{key}={item!r} is not a string, number or boolean: the scripts take each "
                          f"hyperparameter as one command-line value")
    return errors


def parse_overrides(payload: Mapping[str, Any], where: str, settings: Settings) -> JobOverrides:
    """Overrides from the fields of `payload` named in OVERRIDE_FIELDS; `where` prefixes field names in errors.
    `settings` holds the pipeline's cost ceilings and the training code bundle's files.

    Raises InvalidInput listing every bad field.
    """
    errors: list[str] = []

    def choice(name: str, choices: tuple[str, ...]) -> str | None:
        value = payload.get(name)
        if value is not None and value not in choices:
            errors.append(f"{where}.{name}={value!r} is not one of {list(choices)}: pick one of them")
        return value

    def bundled_file(name: str) -> str | None:
        value = payload.get(name)
        if value is not None and (not isinstance(value, str) or value not in settings.bundle_files):
            scripts = sorted(path for path in settings.bundle_files if "/" not in path and path.endswith(".py"))
            errors.append(f"{where}.{name}={value!r} is not a file of the training code bundle: name a script "
                          f"inside source_dir by its path there, e.g. one of {scripts}")
            return None
        return value

    def positive_int(name: str) -> int | None:
        value = payload.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            errors.append(f"{where}.{name}={value!r} is not a positive whole number: e.g. {name}: 2")
            return None
        return value

    def boolean(name: str) -> bool | None:
        value = payload.get(name)
        if value is not None and not isinstance(value, bool):
            errors.append(f"{where}.{name}={value!r} is not true or false: use a JSON boolean")
            return None
        return value

    def experiment_name() -> str | None:
        value = payload.get("mlflow_experiment_name")
        if value is None:
            return None
        if not settings.mlflow_resource_arn:
            errors.append(f"{where}.mlflow_experiment_name={value!r}: the pipeline tracks no experiments (its "
                          f"mlflow_resource_arn is unset): remove the field, or set mlflow_resource_arn and redeploy")
        elif not isinstance(value, str) or not 1 <= len(value) <= MAX_EXPERIMENT_NAME_LENGTH:
            errors.append(f"{where}.mlflow_experiment_name={shown(value)} is not a name of 1 to "
                          f"{MAX_EXPERIMENT_NAME_LENGTH} characters: e.g. \"web-search-ablations\"")
        return value if isinstance(value, str) else None

    instance_type = payload.get("instance_type")
    if instance_type is not None:
        errors += instance_type_errors(instance_type, f"{where}.instance_type")
    errors += ceiling_errors(payload.get("instance_count"), f"{where}.instance_count",
                             ceiling=settings.max_instance_count, setting="max_instance_count")
    errors += ceiling_errors(payload.get("max_runtime"), f"{where}.max_runtime",
                             ceiling=settings.max_runtime_ceiling_seconds, setting="max_runtime_ceiling_seconds")
    hyperparameters = payload.get("hyperparameters", {})
    errors += check_hyperparameters(hyperparameters, f"{where}.hyperparameters")
    tags = payload.get("tags", {})
    if not isinstance(tags, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in tags.items()):
        errors.append(f"{where}.tags={tags!r} is not an object of strings: e.g. {{\"team\": \"search\"}}")
    else:
        errors += tag_errors(tags, f"{where}.tags", reserved_keys=TRIGGER_TAG_KEYS, others=len(TRIGGER_TAG_KEYS))
    # Names and limits are checked on the merged environment, for the distribution the job runs (preflight).
    environment = payload.get("environment", {})
    errors += environment_type_errors(environment, f"{where}.environment")
    overrides = JobOverrides(
        entry_point=bundled_file("entry_point"),
        distribution=choice("distribution", DISTRIBUTIONS),
        instance_type=instance_type,
        instance_count=positive_int("instance_count"),
        hyperparameters=dict(hyperparameters) if isinstance(hyperparameters, Mapping) else {},
        spot=boolean("spot"),
        max_runtime=positive_int("max_runtime"),
        tags=dict(tags) if isinstance(tags, Mapping) else {},
        tensorboard=boolean("tensorboard"),
        environment=dict(environment) if isinstance(environment, Mapping) else {},
        train_data_distribution=choice("train_data_distribution", s3_data_distributions()),
        launch=choice("launch", LAUNCHES),
        infra_check=boolean("infra_check"),
        mlflow_experiment_name=experiment_name(),
    )
    if errors:
        raise InvalidInput(errors)
    return overrides
