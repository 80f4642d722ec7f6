"""torchrun's own account of a failed worker, read from a host's log.

When a worker fails, torchrun (the elastic agent) stops the host's other workers, raises ChildFailedError and prints
a report whose "Root Cause (first observed failure)" section names the worker that failed first: its rank, its exit
code (negative for a signal: -9 is SIGKILL, -6 SIGABRT) and its traceback (from the worker's error file, or the
signal). A worker killed by a signal leaves no Python traceback of its own, so that section is the only record of
why it ended; the last error lines of the log are torchrun's own traceback.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ROOT_CAUSE_HEADING = "Root Cause (first observed failure):"
_FIELD = re.compile(r"^\s+(time|host|rank|exitcode|error_file|traceback)\s*:\s?(.*)$")
_SECTION_END = re.compile(r"^[=-]{10,}$")
_AGENT_TRACEBACK = "Traceback (most recent call last):"
_AGENT_ERROR = "ChildFailedError"
# What torchrun shows in place of a traceback when the worker wrote no error file: a link, not a cause.
_NO_TRACEBACK = "To enable traceback see:"


@dataclass(frozen=True)
class WorkerFailure:
    """The root cause torchrun reported, and where its report starts in the log (what precedes it is the workers')."""

    rank: str  # "1 (local_rank: 1)"
    exitcode: str  # "-9 (pid: 7918)  (SIGKILL)"
    traceback: str  # the error file's last line or "Signal 9 (SIGKILL) received by PID 7918"; "" when neither
    report_start: int

    def summary(self) -> str:
        cause = f": {self.traceback}" if self.traceback else ""
        return f"torchrun root cause: rank {self.rank} exited with exitcode {self.exitcode}{cause}"


def root_cause(lines: list[str]) -> WorkerFailure | None:
    """The last torchrun report's root cause in `lines`, or None where torchrun reported no failed worker."""
    heading = next((index for index in range(len(lines) - 1, -1, -1) if ROOT_CAUSE_HEADING in lines[index]), None)
    if heading is None:
        return None
    fields: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in lines[heading + 1:]:
        if _SECTION_END.match(line.strip()):
            break
        field = _FIELD.match(line)
        if field:
            current = fields.setdefault(field.group(1), [])
            current.append(field.group(2).strip())
        elif current is not None and line.strip():
            current.append(line.strip())  # a multi-line traceback from the worker's error file
    traceback = [line for line in fields.get("traceback", []) if line and not line.startswith(_NO_TRACEBACK)]
    # torchrun's report opens with its own traceback, the last one before ChildFailedError; a worker's comes earlier.
    raised = next((index for index in range(heading, -1, -1) if _AGENT_ERROR in lines[index]), heading)
    agent_traceback = [index for index in range(raised) if lines[index].strip() == _AGENT_TRACEBACK]
    return WorkerFailure(rank=" ".join(fields.get("rank", ["?"])), exitcode=" ".join(fields.get("exitcode", ["?"])),
                         traceback=traceback[-1] if traceback else "",
                         report_start=agent_traceback[-1] if agent_traceback else heading)
