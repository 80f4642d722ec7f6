"""Whether a template's identity policies allow a request, read as IAM reads them, after resolving the template's
intrinsic functions for one account and region.

Enough of IAM's evaluation for the grants this project writes: `Allow` statements only (the stacks write no `Deny`
into identity policies), `*` wildcards in actions and resource ARNs, and the `StringEquals` / `StringLike`
condition operators, whose key must be in the request's context for the statement to apply ("Condition operators",
IAM user guide).
"""

from __future__ import annotations

import fnmatch
import re
from typing import Any

ACCOUNT = "123456789012"  # AWS's documented example account


def resolve(value: Any, *, region: str) -> Any:
    """A template value with `Fn::Sub`, `Fn::Join` and pseudo-parameter `Ref`s replaced by their deployed text."""
    pseudo = {"AWS::AccountId": ACCOUNT, "AWS::Region": region, "AWS::Partition": "aws",
              "AWS::URLSuffix": "amazonaws.com"}
    if isinstance(value, list):
        return [resolve(item, region=region) for item in value]
    if not isinstance(value, dict):
        return value
    if list(value) == ["Fn::Sub"] and isinstance(value["Fn::Sub"], str):
        return re.sub(r"\$\{([^}]+)\}", lambda match: pseudo[match[1]], value["Fn::Sub"])
    if list(value) == ["Fn::Join"]:
        separator, parts = value["Fn::Join"]
        resolved = [resolve(part, region=region) for part in parts]
        return separator.join(resolved) if all(isinstance(part, str) for part in resolved) else value
    if list(value) == ["Ref"] and value["Ref"] in pseudo:
        return pseudo[value["Ref"]]
    return {key: resolve(item, region=region) for key, item in value.items()}


def allows(statements: list[dict[str, Any]], action: str, resource: str, context: dict[str, str] | None = None
           ) -> bool:
    """Whether any statement allows `action` on `resource` with the request's condition `context`."""
    return any(_applies(statement, action, resource, context or {}) for statement in statements)


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _applies(statement: dict[str, Any], action: str, resource: str, context: dict[str, str]) -> bool:
    if statement["Effect"] != "Allow":
        return False
    if not any(fnmatch.fnmatchcase(action, pattern) for pattern in _as_list(statement["Action"])):
        return False
    if not any(isinstance(pattern, str) and fnmatch.fnmatchcase(resource, pattern)
               for pattern in _as_list(statement["Resource"])):
        return False
    for operator, conditions in statement.get("Condition", {}).items():
        for key, expected in conditions.items():
            if key not in context:
                return False
            if operator == "StringEquals":
                matched = context[key] in _as_list(expected)
            elif operator == "StringLike":
                matched = any(fnmatch.fnmatchcase(context[key], pattern) for pattern in _as_list(expected))
            else:
                raise AssertionError(f"condition operator {operator} is not read here: extend iam_policy.py")
            if not matched:
                return False
    return True
