"""A warm start's parents must be tuning jobs of the job's own dataset: read back from SageMaker
(DescribeHyperParameterTuningJob), the data each parent's trials trained on is compared with the job's.

Names cannot tell: a tuning job name keeps only the first characters of its dataset in 32 (job_names.py), so two
datasets that share them share the name's start. What a parent trained on is its training definition's `train`
channel, which the trigger builds from the dataset (DatasetCatalog.uri): its dataset when it lies under the data
bucket's dataset prefix, else the location itself (explicit channels elsewhere).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from botocore.exceptions import ClientError

from training_trigger.datasets import DatasetCatalog
from training_trigger.job_names import job_name_errors
from training_trigger.planning import TRAIN_CHANNEL, TrainingJobSpec

WHERE = "tuning.warm_start.parents"
NOT_FOUND = "ResourceNotFound"

Describe = Callable[[str], Mapping[str, Any]]


def trained_on(uri: str, catalog: DatasetCatalog) -> str:
    """What a `train` channel URI says about its data, for comparison: `dataset 'x'`, or the location."""
    dataset = catalog.dataset_of(uri)
    return f"dataset {dataset!r}" if dataset is not None else repr(uri)


def _train_channel(description: Mapping[str, Any]) -> str | None:
    definitions = ([description["TrainingJobDefinition"]] if "TrainingJobDefinition" in description
                   else description.get("TrainingJobDefinitions", []))
    return next((channel["DataSource"]["S3DataSource"]["S3Uri"] for definition in definitions
                 for channel in definition.get("InputDataConfig", [])
                 if channel["ChannelName"] == TRAIN_CHANNEL and "S3DataSource" in channel["DataSource"]), None)


def parent_dataset_errors(spec: TrainingJobSpec, prefix: str, catalog: DatasetCatalog,
                          describe: Describe) -> list[str]:
    """One error per parent SageMaker does not know or whose trials trained on other data than `spec`'s; parents
    whose names the trigger may not touch are left to the name check (tuning_guards)."""
    ours = trained_on(spec.channels[TRAIN_CHANNEL], catalog)
    errors = []
    for parent in spec.tuning.warm_start_parents:
        if job_name_errors(parent, prefix, tuning=True):
            continue
        try:
            description = describe(parent)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != NOT_FOUND:
                raise
            errors.append(f"{WHERE}: {parent!r} is not a tuning job SageMaker knows: name an earlier tuning job of "
                          f"this dataset")
            continue
        uri = _train_channel(description)
        theirs = trained_on(uri, catalog) if uri is not None else "no S3 train channel"
        if theirs != ours:
            errors.append(f"{WHERE}: {parent!r} trained on {theirs}, not on this job's {ours}: warm-start from "
                          f"the dataset's own earlier tuning jobs")
    return errors
