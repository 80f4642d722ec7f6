"""Whether a training job stopped making progress, judged by its CloudWatch log streams. Pure: no AWS calls.

Only a job SageMaker reports in the `Training` secondary status is judged. Before it (Starting, Downloading,
DownloadingTrainingImage, ...) the service is still preparing instances, data and image, however long that takes;
after it (Uploading, Stopping) the script has ended. Silence is measured from the later of when the job last entered
`Training` (a job restarted after a spot interruption enters it again) and the newest log line of any of its hosts,
so neither a slow start nor a line from before a restart counts against it.

A job is stalled only when every host is silent: a training script usually logs from rank 0 alone, so the other
hosts' streams fall quiet after start-up in a healthy job, while ranks in lock step stop together, so a hang anywhere
silences every host within a step.

SageMaker writes each host's output to the stream `<job name>/algo-<n>-<epoch seconds>` of the log group
/aws/sagemaker/TrainingJobs, a new stream each time the host starts: a host's newest stream speaks for it.

A stream's newest line is the later of what DescribeLogStreams lists (updated eventually, typically within an hour,
so it can lag the stream, never lead it) and what GetLogEvents reads back from the stream's end. A read may return
empty pages before the end (the API reference says so); one that gives up before reaching the start of the range it
reads leaves that line unknown, and an unknown line never makes a host count as silent: the job is not stopped.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

TRAINING = "Training"
IN_PROGRESS = "InProgress"
SUBJECT_LIMIT = 100  # SNS rejects longer subjects
_HOST_OF_STREAM = re.compile(r"/(?P<host>algo-\d+)-\d+$")


@dataclass(frozen=True)
class HostSilence:
    host: str
    log_stream: str | None
    """The host's newest stream; None while it has none."""
    last_line_at: datetime | None
    """Its newest log line; None while it has logged nothing."""


@dataclass(frozen=True)
class Stall:
    """A job in `Training` whose hosts have all been silent for longer than `allowed`."""

    job_name: str
    training_since: datetime
    silent_since: datetime
    allowed: timedelta
    hosts: tuple[HostSilence, ...]
    """Every host, the first to fall silent first."""

    def subject(self) -> str:
        return f"Stalled training job stopped: {self.job_name}"[:SUBJECT_LIMIT]

    def reason(self, now: datetime) -> str:
        heard = "; ".join(f"{host.host}: last line at {_iso(host.last_line_at)}" if host.last_line_at
                          else f"{host.host}: no line since training began" for host in self.hosts)
        return (f"no host logged a line for {_duration(now - self.silent_since)} (since {_iso(self.silent_since)}), "
                f"longer than the {_duration(self.allowed)} allowed ({heard})")

    def notification(self, stopped_at: datetime, log_group: str) -> dict[str, Any]:
        """What the topic receives: which job, why, and which host's stream fell silent when."""
        return {"status": "stopped", "job_name": self.job_name, "reason": self.reason(stopped_at),
                "first_silent_host": self.hosts[0].host, "silent_since": _iso(self.silent_since),
                "training_since": _iso(self.training_since), "stopped_at": _iso(stopped_at), "log_group": log_group,
                "hosts": [{"host": host.host, "log_stream": host.log_stream,
                           "last_line_at": _iso(host.last_line_at) if host.last_line_at else None}
                          for host in self.hosts]}


def training_since(description: Mapping[str, Any]) -> datetime | None:
    """When the job last entered `Training`; None while it is anywhere else."""
    if description.get("TrainingJobStatus") != IN_PROGRESS or description.get("SecondaryStatus") != TRAINING:
        return None
    entered = [transition["StartTime"] for transition in description.get("SecondaryStatusTransitions", [])
               if transition.get("Status") == TRAINING]
    return max(entered, default=None) or description.get("TrainingStartTime") or description["LastModifiedTime"]


@dataclass(frozen=True)
class StreamRead:
    """What GetLogEvents showed of one stream from `start` on, read back from the stream's end."""

    start: datetime
    newest: datetime | None
    """The newest line at or after `start`; None when the read saw none."""
    reached_start: bool
    """Whether the read got back to `start` (a page returned the token it was given). A page may be empty before
    that, so a read that gave up after empty pages shows nothing about the stream."""


def last_lines(listed: Mapping[str, datetime | None], reads: Mapping[str, StreamRead]
               ) -> tuple[dict[str, datetime | None], list[str]]:
    """Each stream's newest line, the later of the time DescribeLogStreams listed and the time read from the stream,
    and the streams whose newest line is unknown: read back without reaching the start of the range, or without the
    line the listing knows of in that range (the listing lags the stream, it never runs ahead of it)."""
    known: dict[str, datetime | None] = {}
    unknown = []
    for stream, listed_at in listed.items():
        read = reads[stream]
        if read.newest is not None:
            known[stream] = max(read.newest, listed_at or read.newest)
        elif read.reached_start and (listed_at is None or listed_at < read.start):
            known[stream] = listed_at
        else:
            unknown.append(stream)
    return known, unknown


def host_names(description: Mapping[str, Any]) -> list[str]:
    """`algo-1` .. `algo-<n>`: SageMaker's names for the job's instances."""
    resources = description.get("ResourceConfig", {})
    count = resources.get("InstanceCount") or sum(group.get("InstanceCount", 0)
                                                  for group in resources.get("InstanceGroups", []))
    return [f"algo-{number}" for number in range(1, count + 1)]


def host_silences(job_name: str, hosts: list[str], last_lines: Mapping[str, datetime | None]
                  ) -> list[HostSilence]:
    """Each host's newest stream and line, from the newest line of each of the job's streams; the first silent
    first (hosts that never logged before any that did)."""
    newest: dict[str, HostSilence] = {host: HostSilence(host, None, None) for host in hosts}
    for stream, last_line in last_lines.items():
        match = _HOST_OF_STREAM.search(stream)
        if not stream.startswith(f"{job_name}/") or match is None:
            continue
        host = match["host"]
        known = newest.get(host)
        if known is None or known.log_stream is None or _later(last_line, known.last_line_at):
            newest[host] = HostSilence(host, stream, last_line)
    return sorted(newest.values(), key=lambda host: (host.last_line_at is not None, host.last_line_at or 0,
                                                     int(host.host.removeprefix("algo-"))))


def assess(description: Mapping[str, Any], last_lines: Mapping[str, datetime | None], now: datetime,
           allowed: timedelta) -> Stall | None:
    """The job's stall, given the newest line of each of its streams (`last_lines`, stream name -> time, None for an
    empty stream); None when it is not in `Training` or some host logged within `allowed`."""
    since = training_since(description)
    if since is None:
        return None
    job_name = description["TrainingJobName"]
    hosts = host_silences(job_name, host_names(description), last_lines)
    silent_since = max([since, *(host.last_line_at for host in hosts if host.last_line_at)])
    if now - silent_since <= allowed:
        return None
    return Stall(job_name, since, silent_since, allowed, tuple(hosts))


def _later(candidate: datetime | None, known: datetime | None) -> bool:
    return candidate is not None and (known is None or candidate > known)


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def _duration(span: timedelta) -> str:
    seconds = int(span.total_seconds())
    return f"{seconds // 60} min" if seconds >= 120 else f"{seconds} s"
