"""The processes of one job: started in their own session, logs streamed line by line, stopped with SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from local_mode.container.launcher import Launch

LogSink = Callable[[str, str], None]  # (host, line)


@dataclass(frozen=True)
class GroupExit:
    """How a group ended. The host that failed first is the one to explain: the others were only told to stop."""

    code: int  # the first non-zero exit code, or 0
    reason: str  # "exit", "stop" or "timeout"
    failed_host: str | None = None


class ProcessGroup:
    """Starts every Launch; when one exits non-zero the others get SIGTERM, as the job fails as a whole.

    Each Launch starts a process group of its own. Stopped, a host runs until no process of that group is left (or the
    grace period ends): a container's shell (ModelTrainer's `sm_train.sh`) dies at once on SIGTERM while the torchrun
    it started is still stopping its workers, which may be writing a last checkpoint. Ended of itself, a host is done
    when its launched process is, and what that left in its group is killed, as a container's processes end with its
    entrypoint."""

    def __init__(self, launches: list[Launch], on_line: LogSink) -> None:
        self._launches = launches
        self._on_line = on_line
        self._processes: list[subprocess.Popen[str]] = []
        self._readers: list[threading.Thread] = []

    def start(self) -> None:
        for launch in self._launches:
            env = {**os.environ, **launch.env}
            # A session of its own: SIGTERM reaches torchrun's workers too, and nothing signals local mode itself.
            process = subprocess.Popen(launch.argv, cwd=launch.cwd, env=env, stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, text=True, bufsize=1, start_new_session=True)
            self._processes.append(process)
            reader = threading.Thread(target=self._stream, args=(launch.host, process), daemon=True)
            reader.start()
            self._readers.append(reader)

    def _stream(self, host: str, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            self._on_line(host, line.rstrip("\n"))

    def wait(self, *, deadline: float, stop_requested: threading.Event, grace_seconds: float) -> GroupExit:
        """Block until all exit; a failure, a stop request or the deadline stops the rest."""
        ended: GroupExit | None = None
        # Poll every process, not just up to the first one still running: a later host's failure must be seen
        # while an earlier host waits on it (a collective that never completes).
        while None in [process.poll() for process in self._processes]:
            failure = self._first_failure()
            if failure or stop_requested.is_set() or time.monotonic() > deadline:
                ended = failure or GroupExit(0, "stop" if stop_requested.is_set() else "timeout")
                self.terminate(grace_seconds)
                break
            time.sleep(0.1)
        self._signal_all(signal.SIGKILL)
        for reader in self._readers:
            reader.join(timeout=5)
        for process in self._processes:
            process.wait()
        return ended or self._first_failure() or GroupExit(0, "exit")

    def _first_failure(self) -> GroupExit | None:
        for launch, process in zip(self._launches, self._processes):
            if process.returncode not in (None, 0):
                return GroupExit(process.returncode, "exit", launch.host)
        return None

    def terminate(self, grace_seconds: float) -> None:
        """SIGTERM to every process group, then SIGKILL to whatever is left after `grace_seconds`."""
        self._signal_all(signal.SIGTERM)
        deadline = time.monotonic() + grace_seconds
        while time.monotonic() < deadline and any(_group_alive(process) for process in self._processes):
            time.sleep(0.1)
        self._signal_all(signal.SIGKILL)

    def _signal_all(self, signum: int) -> None:
        for process in self._processes:
            if _group_alive(process):
                try:
                    os.killpg(process.pid, signum)
                except ProcessLookupError:
                    pass


def _group_alive(process: subprocess.Popen[str]) -> bool:
    """Whether the launched process, or any process of the group it leads, is still running."""
    if process.poll() is None:
        return True
    try:
        os.killpg(process.pid, 0)
    except ProcessLookupError:
        return False
    return True
