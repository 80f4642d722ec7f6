"""A port on this machine's loopback, reachable at the same address from inside a job's network namespace
(container_entrypoint.JobNetwork), whose loopback is its own: how a tracked job's hosts reach local mode's tracking
server at the 127.0.0.1 address its plugin is given (local_mode.job_runtime.mlflow_tracking).

A socket stays in the network namespace it was created in, whichever process uses it later (socket(7), network
namespaces(7)). So a short-lived process started inside the job's network creates the listening socket there and hands
it to local mode over a socket pair (SCM_RIGHTS, unix(7)); local mode accepts each connection on it and joins it to a
connection of its own to the same port on the machine's loopback, copying bytes both ways. Nothing keeps running inside
the namespace, and nothing needs more rights than entering it, which the job's hosts need anyway.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading

from local_mode.aws.network import LOOPBACK

_CHUNK_BYTES = 64 * 1024
# Run inside the job's network ($1 address, $2 port, $3 the descriptor of local mode's end of a socket pair).
_LISTEN_AND_HAND_OVER = """import socket, sys
listener = socket.create_server((sys.argv[1], int(sys.argv[2])))
socket.send_fds(socket.socket(fileno=int(sys.argv[3])), [b"listening"], [listener.fileno()])
"""


class LoopbackRelay:
    """Connections to LOOPBACK:`port` inside the network that the command prefix `enter` runs commands in
    (JobNetwork.enter()), joined to LOOPBACK:`port` on this machine until the relay closes. Context manager."""

    def __init__(self, enter: list[str], port: int) -> None:
        self._enter = enter
        self._port = port
        self._listener: socket.socket | None = None
        self._accepting: threading.Thread | None = None
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()

    def __enter__(self) -> LoopbackRelay:
        self._listener = self._listen_inside()
        self._accepting = threading.Thread(target=self._accept, name=f"loopback-relay-{self._port}", daemon=True)
        self._accepting.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        assert self._listener is not None and self._accepting is not None
        _shut(self._listener)  # ends the accept() waiting on it
        self._accepting.join()
        self._listener.close()
        with self._lock:  # connections the job's processes left open end with it
            for connection in self._open:
                _shut(connection)

    def _listen_inside(self) -> socket.socket:
        ours, theirs = socket.socketpair()
        with ours, theirs:
            listening = subprocess.run(
                [*self._enter, sys.executable, "-c", _LISTEN_AND_HAND_OVER, LOOPBACK, str(self._port),
                 str(theirs.fileno())], pass_fds=(theirs.fileno(),), capture_output=True, text=True)
            if listening.returncode != 0:
                raise RuntimeError(f"local mode could not listen on {LOOPBACK}:{self._port} inside the job's network "
                                   f"to relay it to this machine's: {listening.stderr.strip()}")
            _, descriptors, _, _ = socket.recv_fds(ours, len(b"listening"), 1)
        return socket.socket(fileno=descriptors[0])

    def _accept(self) -> None:
        assert self._listener is not None
        while True:
            try:
                inner, _ = self._listener.accept()
            except OSError:  # shut by __exit__
                return
            threading.Thread(target=self._join, args=(inner,), daemon=True).start()

    def _join(self, inner: socket.socket) -> None:
        """Copy between a connection from inside the job's network and one to the port on this machine's loopback,
        both ways, until both ends are done."""
        with inner:
            try:
                outer = socket.create_connection((LOOPBACK, self._port))
            except OSError:  # nothing listens there (any more): the job's client sees its connection closed
                return
            with outer:
                with self._lock:
                    self._open.update((inner, outer))
                answers = threading.Thread(target=_copy, args=(outer, inner), daemon=True)
                answers.start()
                _copy(inner, outer)
                answers.join()
                with self._lock:
                    self._open.difference_update((inner, outer))


def _copy(source: socket.socket, target: socket.socket) -> None:
    """Bytes from `source` to `target` until `source` ends; then `target`'s sending end, so its reader sees the end
    too (an HTTP client may half-close and still read the answer)."""
    try:
        while data := source.recv(_CHUNK_BYTES):
            target.sendall(data)
        target.shutdown(socket.SHUT_WR)
    except OSError:  # either side reset, or the relay closed: end the other direction too
        _shut(source)
        _shut(target)


def _shut(connection: socket.socket) -> None:
    try:
        connection.shutdown(socket.SHUT_RDWR)
    except OSError:  # not connected (any more)
        pass
