"""Per-job overrides of the stack's defaults, from a manual payload or a dataset's manifest.json.

Validated field by field (no pydantic: the bundle must stay pure Python), so a rejection names every bad field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from training_trigger.errors import InvalidInput
from training_trigger.container_profiles import DISTRIBUTIONS
from training_trigger.settings import ENTRY_POINTS

HyperparameterValue = str | int | float | bool
RESERVED_HYPERPARAMETER_PREFIX = "sagemaker_"

OVERRIDE_FIELDS = ("entry_point", "distribution", "instance_type", "instance_count", "hyperparameters", "spot",
                   "max_runtime", "tags")


@dataclass(frozen=True)
class JobOverrides:
    """Each field None (or empty) means "use the stack's default"."""

    entry_point: str | None = None
    distribution: str | None = None
    instance_type: str | None = None
    instance_count: int | None = None
    hyperparameters: Mapping[str, HyperparameterValue] = field(default_factory=dict)
    spot: bool | None = None
    max_runtime: int | None = None
    tags: Mapping[str, str] = field(default_factory=dict)

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
        )


def check_hyperparameters(value: Any, where: str) -> list[str]:
    """Errors for a hyperparameter mapping: scalar values only, and no product-owned `sagemaker_*` keys."""
    if not isinstance(value, Mapping):
        return [f"{where}={value!r} is not an object: give hyperparameters as {{\"epochs\": 10}}"]
    errors = []
    for key, item in value.items():
        if key.startswith(RESERVED_HYPERPARAMETER_PREFIX):
            errors.append(f"{where}.{key} is set by the trigger itself and may not be overridden: remove it "
                          f"(use the entry_point / distribution fields instead)")
        elif item is None or not isinstance(item, HyperparameterValue):
            errors.append(f"{where}.{key}={item!r} is not a string, number or boolean: the scripts take each "
                          f"hyperparameter as one command-line value")
    return errors


def parse_overrides(payload: Mapping[str, Any], where: str) -> JobOverrides:
    """Overrides from the fields of `payload` named in OVERRIDE_FIELDS; `where` prefixes field names in errors.

    Raises InvalidInput listing every bad field.
    """
    errors: list[str] = []

    def choice(name: str, choices: tuple[str, ...]) -> str | None:
        value = payload.get(name)
        if value is not None and value not in choices:
            errors.append(f"{where}.{name}={value!r} is not one of {list(choices)}: pick one of them")
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

    instance_type = payload.get("instance_type")
    if instance_type is not None and not (isinstance(instance_type, str) and instance_type.startswith("ml.")):
        errors.append(f"{where}.instance_type={instance_type!r} is not a SageMaker instance type: e.g. "
                      f"'ml.g5.12xlarge'")
    hyperparameters = payload.get("hyperparameters", {})
    errors += check_hyperparameters(hyperparameters, f"{where}.hyperparameters")
    tags = payload.get("tags", {})
    if not isinstance(tags, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in tags.items()):
        errors.append(f"{where}.tags={tags!r} is not an object of strings: e.g. {{\"team\": \"search\"}}")
    overrides = JobOverrides(
        entry_point=choice("entry_point", ENTRY_POINTS),
        distribution=choice("distribution", DISTRIBUTIONS),
        instance_type=instance_type,
        instance_count=positive_int("instance_count"),
        hyperparameters=dict(hyperparameters) if isinstance(hyperparameters, Mapping) else {},
        spot=boolean("spot"),
        max_runtime=positive_int("max_runtime"),
        tags=dict(tags) if isinstance(tags, Mapping) else {},
    )
    if errors:
        raise InvalidInput(errors)
    return overrides
