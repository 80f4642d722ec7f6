"""The CreateHyperParameterTuningJob request, as SDK v2's `HyperparameterTuner(PyTorch(...), ...).fit(...)` sends it.

Pure, like request.py, whose `training_job_definition` builds the trials' definition: the same image, channels,
distribution, instances, spot, VPC, KMS, retries and environment as the training job the trigger would start, with
the tuned hyperparameters removed from the static ones. tests/unit/trigger/test_sdk_conformance.py compares the
result field by field with the SDK's request. Where the API or the trigger differ from a training job:

- no CheckpointConfig. The SDK sends the estimator's one `checkpoint_s3_uri` for every trial, and the project's
  scripts resume from the newest snapshot they find there, so each trial would continue the previous one's
  training; without it a trial (and a spot restart of it) trains from its start.
- no warm pool (`KeepAlivePeriodInSeconds`), TensorBoard upload or `EnableSageMakerMetricsTimeSeries`: the API's
  tuning definition has none of them.
- the flags the API defaults to false are left out when false, as the SDK leaves them out.
"""

from __future__ import annotations

import json
from typing import Any

from training_trigger.planning import TrainingJobSpec
from training_trigger.request import script_hyperparameters, training_job_definition
from training_trigger.settings import Settings
from training_trigger.tuning import ParameterRange, TuningJob

# The SDK tags framework jobs with the estimator that made them, so `HyperparameterTuner.attach` can rebuild it;
# the training toolkit ignores `sagemaker_*` keys it does not know.
ESTIMATOR_METADATA = {"sagemaker_estimator_class_name": "PyTorch",
                      "sagemaker_estimator_module": "sagemaker.pytorch.estimator"}
RANGE_KEYS = {"continuous": "ContinuousParameterRanges", "integer": "IntegerParameterRanges",
              "categorical": "CategoricalParameterRanges"}
FALSE_BY_DEFAULT = ("EnableNetworkIsolation", "EnableInterContainerTrafficEncryption", "EnableManagedSpotTraining")
LEFT_OUT = ("CheckpointConfig",)


def flag_name(hyperparameter: str) -> str:
    """The scripts read `learning_rate` and `learning-rate` as one flag."""
    return hyperparameter.replace("_", "-")


def static_hyperparameters(spec: TrainingJobSpec, settings: Settings, tuning: TuningJob) -> dict[str, str]:
    """The training job's hyperparameters without the tuned ones (whichever spelling), plus the SDK's metadata."""
    tuned = {flag_name(found.name) for found in tuning.ranges}
    static = {key: value for key, value in script_hyperparameters(spec, settings).items()
              if flag_name(key) not in tuned}
    return {**static, **{key: json.dumps(value) for key, value in ESTIMATOR_METADATA.items()}}


def parameter_range(found: ParameterRange) -> dict[str, Any]:
    """One range as the SDK writes it for a framework estimator: bounds as text; categorical values as text, then
    JSON-encoded (`CategoricalParameter` keeps `str(value)`), so the training toolkit, which JSON-decodes every
    hyperparameter, passes each to the script as the text the user wrote (`256`, `listwise`)."""
    if found.type == "categorical":
        return {"Name": found.name, "Values": [json.dumps(str(value)) for value in found.values]}
    return {"Name": found.name, "MinValue": str(found.minimum), "MaxValue": str(found.maximum),
            "ScalingType": found.scaling}


def tuning_job_config(tuning: TuningJob) -> dict[str, Any]:
    config: dict[str, Any] = {
        "Strategy": tuning.strategy,
        "ResourceLimits": {"MaxNumberOfTrainingJobs": tuning.max_jobs,
                           "MaxParallelTrainingJobs": tuning.max_parallel_jobs},
        "TrainingJobEarlyStoppingType": tuning.early_stopping,
        "HyperParameterTuningJobObjective": {"Type": tuning.objective_type, "MetricName": tuning.objective_metric},
        # Every kind listed, empty or not, as the SDK sends them.
        "ParameterRanges": {key: [parameter_range(found) for found in tuning.ranges if found.type == kind]
                            for kind, key in RANGE_KEYS.items()},
    }
    if tuning.hyperband is not None:
        # Sent always, as SDK v2's StrategyConfig sends it: SageMaker's own inference of MaxResource reads only a
        # few static hyperparameter names and refuses the job without them (hyperband.py).
        config["StrategyConfig"] = {"HyperbandStrategyConfig": {"MinResource": tuning.hyperband.min_resource,
                                                                "MaxResource": tuning.hyperband.max_resource}}
    if tuning.random_seed is not None:
        config["RandomSeed"] = tuning.random_seed
    return config


def trial_definition(spec: TrainingJobSpec, settings: Settings, tuning: TuningJob) -> dict[str, Any]:
    """CreateHyperParameterTuningJob's TrainingJobDefinition: the training job's definition in the tuning API's
    shape (`HyperParameterTuningResourceConfig`, no keep-alive)."""
    definition = training_job_definition(spec, settings)
    resources = {key: value for key, value in definition.pop("ResourceConfig").items()
                 if key != "KeepAlivePeriodInSeconds"}
    definition = {key: value for key, value in definition.items()
                  if key not in LEFT_OUT and not (key in FALSE_BY_DEFAULT and value is False)}
    return {**definition, "HyperParameterTuningResourceConfig": resources,
            "StaticHyperParameters": static_hyperparameters(spec, settings, tuning)}


def build_tuning_job_request(spec: TrainingJobSpec, settings: Settings) -> dict[str, Any]:
    """The keyword arguments of `sagemaker.create_hyper_parameter_tuning_job(**request)`; `spec.tuning` is set.
    SageMaker adds the tuning job's tags to every trial it starts, so the trials carry the trigger's provenance."""
    tuning = spec.tuning
    request: dict[str, Any] = {
        "HyperParameterTuningJobName": spec.job_name,
        "HyperParameterTuningJobConfig": tuning_job_config(tuning),
        "TrainingJobDefinition": trial_definition(spec, settings, tuning),
        "Tags": [{"Key": key, "Value": value} for key, value in spec.tags.items()],
    }
    if tuning.warm_start_parents:
        request["WarmStartConfig"] = {
            "ParentHyperParameterTuningJobs": [{"HyperParameterTuningJobName": name}
                                               for name in tuning.warm_start_parents],
            "WarmStartType": tuning.warm_start_type}
    return request
