"""From a TriggerRequest to a complete `TrainingJobSpec`: dataset lookup, defaults and overrides, the job name.

Precedence, lowest first: the stack's defaults, the dataset's manifest.json `training` object, the manual payload.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Protocol

from training_trigger import experiment_tracking, health_check
from training_trigger.container_profiles import TOOLKIT_LAUNCH
from training_trigger.datasets import DatasetVersion
from training_trigger.errors import InvalidInput
from training_trigger.events import TriggerRequest
from training_trigger.job_names import (
    dataset_job_name,
    dataset_tuning_job_name,
    job_name_errors,
    manual_job_name,
    manual_tuning_job_name,
)
from training_trigger.limits import channel_name_errors
from training_trigger.hyperparameter_flags import hyperparameter_flag_errors
from training_trigger.overrides import (
    OVERRIDE_FIELDS,
    TRIGGER_TAG_KEYS,
    HyperparameterValue,
    JobOverrides,
    check_hyperparameters,
    parse_overrides,
)
from training_trigger.settings import Settings
from training_trigger.tuning import (
    SECTION_FIELDS,
    TUNING_KEY,
    TuningJob,
    TuningSection,
    parse_tuning_section,
    resolve_tuning,
)

MANIFEST_OVERRIDES_KEY = "training"
TRAIN_CHANNEL = "train"
FULLY_REPLICATED = "FullyReplicated"  # SageMaker's default S3DataDistributionType: every host gets every object


@dataclass(frozen=True)
class TrainingJobSpec:
    """Everything that varies between training jobs; the rest of the request comes from Settings."""

    job_name: str
    channels: Mapping[str, str]  # channel name -> S3 URI
    entry_point: str
    distribution: str
    instance_type: str
    instance_count: int
    hyperparameters: Mapping[str, HyperparameterValue]  # the user's, before JSON encoding
    spot: bool
    max_runtime: int
    tags: Mapping[str, str]
    dry_run: bool = False
    tensorboard: bool = False
    """Upload the TensorBoard logs the scripts write to /opt/ml/output/tensorboard (TensorBoardOutputConfig)."""
    environment: Mapping[str, str] = field(default_factory=dict)
    """The job's environment variables (CreateTrainingJob's `Environment`)."""
    train_data_distribution: str = FULLY_REPLICATED
    """The `train` channel's S3DataDistributionType; every other channel is replicated."""
    tuning: TuningJob | None = None
    """With a `tuning` section: a tuning job named `job_name` whose trials are this job (tuning_request.py)."""
    launch: str = TOOLKIT_LAUNCH
    """How the container starts the entry point (container_profiles.LAUNCHES; docs/trigger.md, Launch)."""
    infra_check: bool = False
    """Run SageMaker's cluster health check first (InfraCheckConfig; health_check.py)."""
    mlflow: experiment_tracking.MlflowRun | None = None
    """The MLflow run the job logs to (MlflowConfig, and MLflow's variables in `environment`), or None."""


class Catalog(Protocol):
    def uri(self, dataset: str, version: str, channel: str = "") -> str: ...
    def version(self, dataset: str, version: str) -> DatasetVersion | None: ...
    def newest_complete_version(self, dataset: str | None = None) -> DatasetVersion | None: ...
    def manifest(self, found: DatasetVersion) -> dict: ...


def plan_training_job(request: TriggerRequest, settings: Settings, catalog: Catalog) -> TrainingJobSpec | None:
    """The job to run, or None when a schedule finds no complete dataset version. Raises InvalidInput."""
    found = _dataset_version(request, catalog)
    if request.source == "schedule" and found is None:
        return None
    defaults = JobOverrides(
        entry_point=settings.default_entry_point, distribution=settings.default_distribution,
        instance_type=settings.default_instance_type, instance_count=settings.default_instance_count,
        hyperparameters=dict(settings.default_hyperparameters), spot=settings.use_spot,
        max_runtime=settings.max_runtime_seconds, tensorboard=settings.tensorboard,
        environment=dict(settings.default_environment), train_data_distribution=settings.train_data_distribution,
        launch=settings.default_launch,
    )
    manifest = catalog.manifest(found) if found is not None else {}
    overrides = defaults.then(_manifest_overrides(found, manifest, catalog, settings)).then(request.overrides)
    section = _manifest_tuning(found, manifest, catalog)
    if request.tuning is not None:
        section = (section or TuningSection()).then(request.tuning)
    tuning = None if section is None else resolve_tuning(section, entry_point=overrides.entry_point,
                                                         settings=settings, where=TUNING_KEY,
                                                         hyperparameters=overrides.hyperparameters)
    errors = check_hyperparameters(overrides.hyperparameters, "hyperparameters")
    if overrides.entry_point in settings.checked_entry_points:
        # After merging: the script that runs decides which flags exist, whichever layer named it.
        errors += hyperparameter_flag_errors(overrides.hyperparameters, settings.training_flags, "hyperparameters")
    channels = dict(request.channels) or {name: catalog.uri(found.dataset, found.version, name)
                                          for name in found.channels}
    if found is not None:
        errors += channel_name_errors(found.channels, f"folders of {catalog.uri(found.dataset, found.version)}")
    errors += _train_channel_errors(channels, found, catalog)
    job_name = _job_name(request, found, overrides, channels, settings, tuning)
    errors += job_name_errors(job_name, settings.job_name_prefix, tuning=tuning is not None)
    mlflow = _mlflow_run(settings, overrides, found, job_name)
    errors += _tracking_variable_errors(overrides.environment, mlflow)
    if errors:
        raise InvalidInput(errors)
    return TrainingJobSpec(
        job_name=job_name, channels=channels, entry_point=overrides.entry_point,
        distribution=overrides.distribution, instance_type=overrides.instance_type,
        instance_count=overrides.instance_count, hyperparameters=overrides.hyperparameters, spot=overrides.spot,
        max_runtime=overrides.max_runtime, tags={**overrides.tags, **_provenance_tags(request, found)},
        dry_run=request.dry_run, tensorboard=bool(overrides.tensorboard),
        environment=mlflow.job_environment(overrides.environment) if mlflow else overrides.environment,
        train_data_distribution=overrides.train_data_distribution, tuning=tuning, launch=overrides.launch,
        infra_check=(health_check.runs_health_check(settings.infra_check, overrides.instance_count)
                     if overrides.infra_check is None else overrides.infra_check),
        mlflow=mlflow,
    )


def _mlflow_run(settings: Settings, overrides: JobOverrides, found: DatasetVersion | None,
                job_name: str) -> experiment_tracking.MlflowRun | None:
    """The job's run in the stack's managed MLflow: the experiment of its dataset (or the one it names), the run
    named after the job. None where the stack tracks nothing."""
    if not settings.mlflow_resource_arn:
        return None
    experiment = overrides.mlflow_experiment_name or experiment_tracking.experiment_name(
        settings.job_name_prefix, found.dataset if found is not None else None)
    return experiment_tracking.MlflowRun(settings.mlflow_resource_arn, experiment, job_name, settings.output_s3_uri)


def _tracking_variable_errors(environment: Mapping[str, str],
                              mlflow: experiment_tracking.MlflowRun | None) -> list[str]:
    """A tracked job's MLflow variables come from the stack's server and the job's experiment, not from its
    environment (where they would point the run elsewhere than MlflowConfig says)."""
    if mlflow is None:
        return []
    return [f"environment.{name} is set by the pipeline from its mlflow_resource_arn and the job's experiment: "
            f"remove it (name another experiment with mlflow_experiment_name)"
            for name in experiment_tracking.TRACKING_VARIABLES if name in environment]


def _train_channel_errors(channels: Mapping[str, str], found: DatasetVersion | None, catalog: Catalog) -> list[str]:
    """The training scripts need a `train` channel: said as the user wrote the data (a version's folders, or the
    payload's channels), before the request is built, so no API jargon about an empty InputDataConfig comes first."""
    if TRAIN_CHANNEL in channels:
        return []
    if found is None:
        return [f"channels: {sorted(channels)} has no {TRAIN_CHANNEL!r} channel, which the training scripts require: "
                f"give channels.{TRAIN_CHANNEL}"]
    root = catalog.uri(found.dataset, found.version)
    holds = f"its folders are {list(found.channels)}" if found.channels else "it holds no folder, only its marker"
    return [f"{root} has no {TRAIN_CHANNEL!r} folder ({holds}), which the training scripts require: upload the "
            f"training data under {catalog.uri(found.dataset, found.version, TRAIN_CHANNEL)} and write the marker "
            f"again"]


def _dataset_version(request: TriggerRequest, catalog: Catalog) -> DatasetVersion | None:
    if request.channels:
        return None
    if request.version is None:
        found = catalog.newest_complete_version(request.dataset)
        if found is None and request.source == "manual":
            raise InvalidInput([f"dataset={request.dataset!r} has no complete version (none has a marker): upload "
                                f"the data and its marker, or give channels explicitly"])
        return found
    found = catalog.version(request.dataset, request.version)
    if found is None:
        raise InvalidInput([f"dataset {request.dataset!r} version {request.version!r} has no marker at "
                            f"{catalog.uri(request.dataset, request.version)}: it is incomplete or missing; "
                            f"upload its marker once all channels are written"])
    if request.marker_etag:
        # The job is keyed by the marker the event saw: a marker rewritten since then brings its own event.
        return replace(found, marker_key=request.marker_key, marker_etag=request.marker_etag)
    return found


def _manifest_tuning(found: DatasetVersion | None, manifest: Mapping[str, object],
                     catalog: Catalog) -> TuningSection | None:
    if found is None or TUNING_KEY not in manifest:
        return None
    return parse_tuning_section(manifest[TUNING_KEY], f"{catalog.uri(found.dataset, found.version)}manifest.json "
                                                      f"{TUNING_KEY}")


def _manifest_overrides(found: DatasetVersion | None, manifest: Mapping[str, object], catalog: Catalog,
                        settings: Settings) -> JobOverrides:
    if found is None:
        return JobOverrides()
    misspelt = misspelt_section_keys(manifest)
    if misspelt:
        raise InvalidInput([f"{catalog.uri(found.dataset, found.version)}manifest.json {key} looks like a misspelt "
                            f"{meant!r}: {'job' if meant == MANIFEST_OVERRIDES_KEY else 'tuning'} settings go under "
                            f"{meant!r}; rename it, or give free metadata a name unlike it"
                            for key, meant in misspelt.items()])
    training = manifest.get(MANIFEST_OVERRIDES_KEY, {})
    where = f"{catalog.uri(found.dataset, found.version)}manifest.json {MANIFEST_OVERRIDES_KEY}"
    if not isinstance(training, Mapping):
        raise InvalidInput([f"{where}={training!r} is not an object: e.g. {{\"instance_count\": 2}}"])
    unknown = [name for name in training if name not in JobOverrides.__dataclass_fields__]
    if unknown:
        raise InvalidInput([f"{where}.{name} is not an override: use one of "
                            f"{list(JobOverrides.__dataclass_fields__)}" for name in unknown])
    return parse_overrides(training, where=where, settings=settings)


def misspelt_section_keys(manifest: Mapping[str, object]) -> dict[str, str]:
    """Top-level keys other than `training` and `tuning` that hold their settings, each with the section it was
    meant as: a name close to one, or an object naming an override field (`training`) or a tuning field
    (`tuning`). Other top-level keys are free metadata."""
    sections = (MANIFEST_OVERRIDES_KEY, TUNING_KEY)
    misspelt = {}
    for key, value in manifest.items():
        if key in sections:
            continue
        close = difflib.get_close_matches(key.lower(), sections, n=1, cutoff=0.8)
        fields = set(value) if isinstance(value, Mapping) else set()
        if close:
            misspelt[key] = close[0]
        elif fields & set(OVERRIDE_FIELDS):
            misspelt[key] = MANIFEST_OVERRIDES_KEY
        elif fields & set(SECTION_FIELDS):
            misspelt[key] = TUNING_KEY
    return misspelt


def _job_name(request: TriggerRequest, found: DatasetVersion | None, overrides: JobOverrides,
              channels: Mapping[str, str], settings: Settings, tuning: TuningJob | None) -> str:
    if request.job_name:
        return request.job_name
    if request.source == "manual":
        if tuning is not None:
            return manual_tuning_job_name(settings.job_name_prefix, request.dataset)
        return manual_job_name(settings.job_name_prefix, request.dataset)
    key = job_key(request, found, overrides, channels, settings, tuning)
    if tuning is not None:
        return dataset_tuning_job_name(settings.job_name_prefix, found.dataset, key)
    return dataset_job_name(settings.job_name_prefix, found.dataset, found.version, key)


def job_key(request: TriggerRequest, found: DatasetVersion, overrides: JobOverrides, channels: Mapping[str, str],
            settings: Settings, tuning: TuningJob | None = None) -> str:
    """What "the same job" is for dataset events and the schedule: equal keys give equal job names, and SageMaker
    starts a name only once.

    - the marker object: its version id in the versioned data bucket, so a marker written again is a new job even
      with the same bytes (an ETag is no content hash under SSE-KMS, and always the same for an empty `_SUCCESS`);
      its ETag only where the event carries no version (an unversioned bucket);
    - for the schedule, the tick's time: every tick retrains, a redelivered tick does not;
    - the effective job: its channels and the overrides after defaults, manifest and payload;
    - the stack's trigger settings, among them the code bundle (its S3 key is the bundle's content hash) and the
      image, so a redeploy with new training code or new defaults trains again;
    - for a tuning job, its resolved tuning section (a training job's key has no such entry).
    """
    key = {
        "dataset": found.dataset, "version": found.version, "marker": found.marker_key,
        "marker_version": request.marker_version_id or found.marker_etag,
        "schedule_tick": request.scheduled_time,
        "job": {"channels": dict(channels), **asdict(overrides)},
        "stack": asdict(settings),
    }
    if tuning is not None:
        key["tuning"] = asdict(tuning)
    return json.dumps(key, sort_keys=True, default=_json_value)


def _json_value(value: object) -> object:
    """The settings' sets (the bundle's files) and read-only mappings, as JSON can hold them."""
    return sorted(value) if isinstance(value, (set, frozenset)) else dict(value)


def _provenance_tags(request: TriggerRequest, found: DatasetVersion | None) -> dict[str, str]:
    values = [request.source] + ([found.dataset, found.version, found.marker_etag] if found is not None else [])
    return dict(zip(TRIGGER_TAG_KEYS, values))
