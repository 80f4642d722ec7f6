"""EventBridge's matching of an event against a rule's event pattern, for the pattern features the stacks write:
nested objects, lists of values, `prefix`, `exists` and `anything-but`.

A pattern field matches when the event has the field and one of the listed options matches its value (any element
of a list value); a nested object matches field by field.
"""

from __future__ import annotations

from typing import Any


def matches(pattern: dict[str, Any], event: dict[str, Any]) -> bool:
    return all(_field_matches(part, key in event, event.get(key)) for key, part in pattern.items())


def _field_matches(pattern: Any, present: bool, value: Any) -> bool:
    if isinstance(pattern, dict):
        return present and isinstance(value, dict) and matches(pattern, value)
    values = value if isinstance(value, list) else [value]
    return any(_option_matches(option, present, values) for option in pattern)


def _option_matches(option: Any, present: bool, values: list[Any]) -> bool:
    if not isinstance(option, dict):
        return present and option in values
    (operator, operand), = option.items()
    if operator == "exists":
        return present is operand
    if not present:
        return False
    if operator == "prefix":
        return any(isinstance(value, str) and value.startswith(operand) for value in values)
    if operator == "anything-but":
        refused = operand if isinstance(operand, list) else [operand]
        return all(value not in refused for value in values)
    raise ValueError(f"local EventBridge does not match {operator!r} patterns; add it to local_mode/event_rules.py")
