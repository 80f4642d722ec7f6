"""A job's hyperparameters against the training code's own flags, before any SageMaker call.

The definitions come from the training code (`ranker.config.flag_definitions()`, written into the bundle at
synthesis), so the names, types, ranges and choices checked here are the ones the script enforces when it starts.
Values are read as the script will see them: SageMaker's training toolkit passes each hyperparameter as
`--name value`, the value's text after JSON decoding.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any


def hyperparameter_flag_errors(hyperparameters: Mapping[str, Any], definitions: Mapping[str, Any],
                               where: str) -> list[str]:
    """One error per hyperparameter the script would refuse, naming it, its value and the fix."""
    errors = []
    for key, value in hyperparameters.items():
        problem = flag_problem(key, value, definitions)
        if problem:
            errors.append(f"{where}.{key}{problem}")
    return errors


def flag_kind(key: str, definitions: Mapping[str, Any]) -> str | None:
    """The flag's type (`int`, `float`, `bool`, `str`), or None when the scripts have no such flag."""
    flag = definitions.get("flags", {}).get(key.replace("_", "-"))
    return None if flag is None else flag["type"]


def flag_problem(key: str, value: Any, definitions: Mapping[str, Any]) -> str | None:
    """What follows the field's name in an error when the script would refuse `--key value`, or None."""
    flags = definitions.get("flags", {})
    name = key.replace("_", "-")
    if name not in flags:
        close = difflib.get_close_matches(name, list(flags), n=3)
        hint = f"did you mean {close}?" if close else "see the flags in docs/training.md"
        return f" is not a flag of the training scripts: {hint}"
    problem = _value_problem(value, flags[name], definitions)
    return f"={value!r} is refused by --{name}: use {problem}" if problem else None


def _value_problem(value: Any, flag: Mapping[str, Any], definitions: Mapping[str, Any]) -> str | None:
    """What to use instead, or None when the script accepts `value`."""
    kind = flag["type"]
    text = str(value)
    if kind == "bool":
        words = [*definitions["true_texts"], *definitions["false_texts"]]
        return None if text.strip().lower() in words else f"true or false (or one of {words})"
    if kind in ("int", "float"):
        # JSON true reaches the script as the text "True", which no number flag takes.
        number = None if isinstance(value, bool) else _number(text, int if kind == "int" else float)
        if number is None:
            return "a whole number" if kind == "int" else "a number"
        return None if _within(number, flag) else flag["use"]
    if "choices" in flag and text not in flag["choices"]:
        return flag["use"]
    return None


def _number(text: str, convert: type) -> float | None:
    try:
        return convert(text)
    except ValueError:
        return None


def _within(number: float, flag: Mapping[str, Any]) -> bool:
    """The bounds the training code declares; every comparison is false for NaN, as in the script's own check."""
    checks = (("minimum", lambda bound: number >= bound), ("maximum", lambda bound: number <= bound),
              ("above", lambda bound: number > bound), ("below", lambda bound: number < bound))
    return all(holds(flag[name]) for name, holds in checks if name in flag)
