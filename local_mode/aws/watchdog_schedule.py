"""The stalled-job watchdog on its schedule, locally: EventBridge's `Scheduled Event`, delivered to the unchanged
handler once per period for as long as the local pipeline runs.

Ticks fall on a fixed wall-clock grid as a rate schedule's do; sweeps run one at a time, so a sweep that overruns its
period takes the next tick's place (EventBridge would start the next one beside it, and SageMaker's refusal to stop a
job twice keeps that from reporting twice).
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from local_mode.aws.local_clients import LOCAL_REGION

_RATE = re.compile(r"^rate\((?P<value>\d+) (?P<unit>minute|minutes|hour|hours|day|days)\)$")
_UNIT_SECONDS = {"minute": 60, "hour": 3600, "day": 86400}


@dataclass(frozen=True)
class WatchdogTiming:
    """Local stand-ins for `stall_minutes` and `stall_check_minutes`, in seconds, so that a test or a demo sees a
    hung job stopped without waiting an hour."""

    stall_seconds: int
    period_seconds: float


def schedule_seconds(expression: str) -> float:
    """The period of an EventBridge `rate(...)` expression."""
    match = _RATE.match(expression)
    if match is None:
        raise ValueError(f"schedule {expression!r}: local mode runs `rate(<n> minutes|hours|days)` schedules only")
    return int(match["value"]) * _UNIT_SECONDS[match["unit"].removesuffix("s")]


def scheduled_event(*, account: str, rule_name: str) -> dict[str, Any]:
    """The event a scheduled rule hands its target."""
    return {"version": "0", "id": str(uuid.uuid4()), "detail-type": "Scheduled Event", "source": "aws.events",
            "account": account, "time": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "region": LOCAL_REGION, "resources": [f"arn:aws:events:{LOCAL_REGION}:{account}:rule/{rule_name}"],
            "detail": {}}


class LocalSchedule:
    """Calls `tick()` every `period_seconds` on a thread of its own until stopped; what a tick raises goes to
    `on_error` (EventBridge would dead-letter it) and the schedule goes on."""

    def __init__(self, period_seconds: float, tick: Callable[[], None], on_error: Callable[[Exception], None]) -> None:
        self._period = period_seconds
        self._tick = tick
        self._on_error = on_error
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="local-schedule", daemon=True)

    def start(self) -> "LocalSchedule":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join()

    def _run(self) -> None:
        next_tick = time.monotonic() + self._period
        while not self._stopped.wait(max(0.0, next_tick - time.monotonic())):
            try:
                self._tick()
            except Exception as error:  # one failed sweep must not end the schedule
                self._on_error(error)
            while next_tick <= time.monotonic():
                next_tick += self._period
