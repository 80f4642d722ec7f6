"""Hyperband's resource: how many epochs a trial may train (`MaxResource`) and must train before Hyperband may stop
it (`MinResource`), sent as CreateHyperParameterTuningJob's `StrategyConfig.HyperbandStrategyConfig`.

AWS's HyperbandStrategyConfig reference: without `MaxResource`, SageMaker infers it from a static hyperparameter
named `epochs`, `numepochs`, `n-epochs`, `n_epochs` or `num_epochs`, and otherwise refuses the tuning job; at most
20,000. The trigger never leaves it to that inference: it sends both values, as SDK v2 does for
`HyperparameterTuner(strategy="Hyperband", strategy_config=StrategyConfig(HyperbandStrategyConfig(...)))`, taken from
the `tuning` section, else from the job's own epochs, else (for the project's scripts) from `--epochs`' default.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

HYPERBAND = "Hyperband"
# The static hyperparameters SageMaker reads MaxResource from, in the order its reference lists them.
EPOCH_HYPERPARAMETERS = ("epochs", "numepochs", "n-epochs", "n_epochs", "num_epochs")
MAX_RESOURCE_LIMIT = 20_000
# The API's least MinResource (botocore's model: HyperbandStrategyMinResource, min 1): Hyperband may stop a trial
# once it has reported its objective once.
DEFAULT_MIN_RESOURCE = 1


@dataclass(frozen=True)
class HyperbandResource:
    min_resource: int
    max_resource: int
    max_from: str
    """Where `max_resource` came from, for messages: `tuning.max_resource`, `hyperparameters.epochs`, ..."""


def _whole(value: Any) -> int | None:
    """A hyperparameter's value as the script reads a whole number (SageMaker passes its text), else None."""
    if isinstance(value, bool):
        return None
    try:
        return int(str(value))
    except ValueError:
        return None


def _flag(name: str) -> str:
    """The scripts read `n_epochs` and `n-epochs` as one flag, and the static hyperparameters lose both when one is
    tuned (tuning_request.static_hyperparameters)."""
    return name.replace("_", "-")


def epochs_of_job(hyperparameters: Mapping[str, Any], tuned: Collection[str],
                  default_epochs: int | None) -> tuple[Any, str]:
    """The epochs every trial trains, as given, and where that comes from: a static epoch hyperparameter, else the
    script's `--epochs` default (None where the script has none or it is tuned): (None, "") when neither."""
    tuned_flags = {_flag(name) for name in tuned}
    for name in EPOCH_HYPERPARAMETERS:
        if name in hyperparameters and _flag(name) not in tuned_flags:
            return hyperparameters[name], f"hyperparameters.{name}"
    if "epochs" not in tuned_flags and default_epochs is not None:
        return default_epochs, "the entry point's --epochs default"
    return None, ""


def hyperband_resource(*, min_resource: int | None, max_resource: int | None, hyperparameters: Mapping[str, Any],
                       tuned: Collection[str], default_epochs: int | None,
                       where: str) -> tuple[HyperbandResource | None, list[str]]:
    """The resource a Hyperband search sends, or the error naming the missing field and the fix."""
    least = min_resource or DEFAULT_MIN_RESOURCE
    if max_resource is not None:
        return HyperbandResource(least, max_resource, f"{where}.max_resource"), []
    epochs, source = epochs_of_job(hyperparameters, tuned, default_epochs)
    whole = _whole(epochs)
    if whole is not None and whole >= 1:
        return HyperbandResource(least, whole, source), []
    tuned_epochs = [name for name in tuned if _flag(name) in {_flag(known) for known in EPOCH_HYPERPARAMETERS}]
    why = (f"{source}={epochs!r} is not a number of epochs >= 1" if source else
           f"this job tunes {tuned_epochs[0]}" if tuned_epochs else "this job sets none")
    return None, [f"{where}.max_resource is missing: strategy 'Hyperband' needs the most epochs a trial may train "
                  f"(HyperbandStrategyConfig.MaxResource), which SageMaker infers only from a static "
                  f"{'/'.join(EPOCH_HYPERPARAMETERS)} hyperparameter, and {why}: give {where}.max_resource (e.g. 10), "
                  f"or set hyperparameters.epochs and leave it untuned"]


def hyperband_resource_errors(resource: HyperbandResource, where: str) -> list[str]:
    """AWS's bounds on the resource (HyperbandStrategyConfig reference) and their order."""
    errors = []
    if resource.max_resource > MAX_RESOURCE_LIMIT:
        errors.append(f"{resource.max_from}={resource.max_resource} exceeds Hyperband's {MAX_RESOURCE_LIMIT} epochs "
                      f"(HyperbandStrategyConfig.MaxResource): lower it")
    if resource.min_resource > resource.max_resource:
        errors.append(f"{where}.min_resource={resource.min_resource} exceeds the most epochs a trial trains, "
                      f"{resource.max_resource} ({resource.max_from}): a trial is stopped at MaxResource, so it "
                      f"never reaches it; lower min_resource")
    return errors
