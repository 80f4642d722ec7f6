"""Checks a request against botocore's SageMaker service model, as the service's front door does.

botocore's own validator covers required members, types and minimums; the service also enforces enums,
maximum lengths and patterns, which the model records but botocore does not check client-side.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

import botocore.session
from botocore.model import OperationModel, Shape
from botocore.validate import ParamValidator

from local_mode.sagemaker_api.service_errors import validation_error


@cache
def operation_model(operation: str) -> OperationModel:
    return botocore.session.get_session().get_service_model("sagemaker").operation_model(operation)


def validate_request(operation: str, params: dict[str, Any]) -> None:
    """Raise ValidationException naming every bad field when `params` breaks `operation`'s input shape."""
    shape = operation_model(operation).input_shape
    report = ParamValidator().validate(params, shape)
    problems = [report.generate_report()] if report.has_errors() else []
    problems.extend(_constraint_problems(params, shape, "input"))
    if problems:
        raise validation_error(f"{len(problems)} validation error(s) detected: " + "; ".join(problems))


def _constraint_problems(value: Any, shape: Shape, path: str) -> list[str]:
    if shape.type_name == "structure" and isinstance(value, dict):
        return [problem for name, member in shape.members.items() if name in value
                for problem in _constraint_problems(value[name], member, f"{path}.{name}")]
    if shape.type_name == "list" and isinstance(value, list):
        return [problem for index, item in enumerate(value)
                for problem in _constraint_problems(item, shape.member, f"{path}[{index}]")]
    if shape.type_name == "map" and isinstance(value, dict):
        return [problem for key, item in value.items()
                for problem in _constraint_problems(key, shape.key, f"{path} key {key!r}")
                + _constraint_problems(item, shape.value, f"{path}.{key}")]
    if shape.type_name == "string" and isinstance(value, str):
        return _string_problems(value, shape, path)
    return []


def _string_problems(value: str, shape: Shape, path: str) -> list[str]:
    problems = []
    if shape.enum and value not in shape.enum:
        problems.append(f"Value {value!r} at '{path}' failed to satisfy constraint: "
                        f"Member must satisfy enum value set: {shape.enum}")
    maximum = shape.metadata.get("max")
    if maximum is not None and len(value) > maximum:
        problems.append(f"Value at '{path}' failed to satisfy constraint: "
                        f"Member must have length less than or equal to {maximum}")
    pattern = _compiled(shape.metadata.get("pattern"))
    if pattern is not None and not pattern.fullmatch(value):
        problems.append(f"Value {value!r} at '{path}' failed to satisfy constraint: "
                        f"Member must satisfy regular expression pattern: {pattern.pattern}")
    return problems


@cache
def _compiled(pattern: str | None) -> re.Pattern[str] | None:
    """The model's pattern, or None when absent or written in Java syntax Python cannot read (then unchecked)."""
    if pattern is None:
        return None
    try:
        return re.compile(pattern, re.DOTALL)
    except re.error:
        return None
