"""A port on this machine's loopback, reached from inside a job's network namespace through the relay, and only
while the relay is open."""

from __future__ import annotations

import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from local_mode.aws.network import LOOPBACK
from local_mode.container.container_entrypoint import JobNetwork
from local_mode.container.loopback_relay import LoopbackRelay

# A request body larger than one read of the relay, so that it takes several, both ways.
CALL = """import sys, urllib.request
body = bytes(range(256)) * 1024
with urllib.request.urlopen(urllib.request.Request(sys.argv[1], data=body), timeout=10) as answer:
    print("echoed intact" if answer.read() == body else "echoed altered")
"""


class _Echo(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def _call_from_inside(network: JobNetwork, port: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*network.enter(), sys.executable, "-c", CALL, f"http://{LOOPBACK}:{port}/"],
                          capture_output=True, text=True, timeout=60)


def test_a_process_in_a_jobs_network_reaches_a_server_on_the_machines_loopback_through_the_relay(
        container_namespaces):
    # Given an HTTP server on this machine's loopback, and a job's network
    with ThreadingHTTPServer((LOOPBACK, 0), _Echo) as server, JobNetwork() as network:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        port = server.server_address[1]
        # When a process inside the network calls the server's address: alone, through the relay, after it closed
        alone = _call_from_inside(network, port)
        with LoopbackRelay(network.enter(), port):
            relayed = _call_from_inside(network, port)
        after = _call_from_inside(network, port)
        server.shutdown()

    # Then only the relayed call reached it, and got its answer whole
    assert relayed.returncode == 0 and relayed.stdout == "echoed intact\n", relayed.stderr
    for refused in (alone, after):
        assert refused.returncode != 0 and "Connection refused" in refused.stderr
