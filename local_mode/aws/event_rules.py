"""EventBridge's matching of an event against a rule's event pattern, done by moto's EventBridge (the matcher its
`PutEvents` delivers with), so that local mode and the tests judge the stacks' patterns by an implementation of
EventBridge's documented rules rather than one of the project's own."""

from __future__ import annotations

import json
from typing import Any

from moto.events.models import EventPattern


def matches(pattern: dict[str, Any], event: dict[str, Any]) -> bool:
    """Whether EventBridge would deliver `event` to a rule with `pattern` (refused like PutRule when malformed)."""
    return EventPattern.load(json.dumps(pattern)).matches_event(event)
