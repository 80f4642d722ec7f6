"""A host's processes end as a container's do: stopped, the host runs until everything its launched process started
has ended (a shell that dies at once on SIGTERM leaves torchrun stopping its workers); ended of itself, it takes what
it left behind with it."""

from __future__ import annotations

import os
import threading
import time

from local_mode.container.launcher import Launch
from local_mode.container.process_group import ProcessGroup

# A shell that dies on SIGTERM at once, over a child that, told to stop, takes a second to write its last file. The
# child's output goes elsewhere, as torchrun's goes to the driver that started it, which dies with the shell.
SHELL_OVER_A_SLOW_STOPPER = ("sh -c 'trap \"sleep 1; echo written > last.txt; exit 0\" TERM; touch ready; "
                             "while :; do sleep 0.1; done' > /dev/null 2>&1 & wait")


def started(launch: Launch, lines: list[str]) -> ProcessGroup:
    group = ProcessGroup([launch], lambda host, line: lines.append(line))
    group.start()
    return group


def test_a_stopped_host_runs_until_the_processes_its_shell_started_have_stopped(tmp_path):
    # Given a host whose shell started a process that needs a moment to stop
    group = started(Launch("algo-1", ["sh", "-c", SHELL_OVER_A_SLOW_STOPPER], {}, tmp_path), [])
    while not (tmp_path / "ready").exists():
        time.sleep(0.05)

    # When the job is stopped
    stop = threading.Event()
    stop.set()
    ended = group.wait(deadline=time.monotonic() + 60, stop_requested=stop, grace_seconds=20)

    # Then the host ended stopped, once that process had written its last file
    assert ended.reason == "stop"
    assert (tmp_path / "last.txt").read_text() == "written\n"


def test_a_host_that_ended_takes_what_it_left_running_with_it(tmp_path):
    # Given a host whose launched process exits, leaving a process of its own behind
    lines: list[str] = []
    group = started(Launch("algo-1", ["sh", "-c", "sleep 60 & echo $!"], {}, tmp_path), lines)

    # When the host ends
    ended = group.wait(deadline=time.monotonic() + 60, stop_requested=threading.Event(), grace_seconds=5)

    # Then the job ended well, and the process it left is gone, as a container's are when its entrypoint exits
    assert (ended.reason, ended.code) == ("exit", 0)
    left_behind = int(lines[0])
    deadline = time.monotonic() + 5
    while _exists(left_behind) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _exists(left_behind)


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # Killed, it is a zombie until the process it was handed to (the shell is gone) reaps it
    with open(f"/proc/{pid}/stat") as stat:
        return not stat.read().rsplit(") ", 1)[-1].startswith("Z")
