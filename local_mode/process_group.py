"""The processes of one job: started in their own session, logs streamed line by line, stopped with SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable

from local_mode.launcher import Launch

LogSink = Callable[[str, str], None]  # (host, line)


class ProcessGroup:
    """Starts every Launch; when one exits non-zero the others get SIGTERM, as the job fails as a whole."""

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

    def wait(self, *, deadline: float, stop_requested: threading.Event, grace_seconds: float) -> tuple[int, str]:
        """Block until all exit. Returns (first non-zero exit code or 0, why it ended: "exit", "stop", "timeout")."""
        reason, first_failure = "exit", 0
        while any(process.poll() is None for process in self._processes):
            failed = [process.returncode for process in self._processes if process.returncode not in (None, 0)]
            if failed or stop_requested.is_set() or time.monotonic() > deadline:
                if failed:
                    first_failure = failed[0]
                else:
                    reason = "stop" if stop_requested.is_set() else "timeout"
                self.terminate(grace_seconds)
                break
            time.sleep(0.1)
        for reader in self._readers:
            reader.join(timeout=5)
        codes = [process.wait() for process in self._processes]
        if reason == "exit" and not first_failure:
            first_failure = next((code for code in codes if code != 0), 0)
        return first_failure, reason

    def terminate(self, grace_seconds: float) -> None:
        """SIGTERM to every process group, then SIGKILL to whatever is left after `grace_seconds`."""
        self._signal_all(signal.SIGTERM)
        deadline = time.monotonic() + grace_seconds
        while time.monotonic() < deadline and any(process.poll() is None for process in self._processes):
            time.sleep(0.1)
        self._signal_all(signal.SIGKILL)

    def _signal_all(self, signum: int) -> None:
        for process in self._processes:
            if process.poll() is None:
                try:
                    os.killpg(process.pid, signum)
                except ProcessLookupError:
                    pass
