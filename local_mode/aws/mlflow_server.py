"""SageMaker managed MLflow, locally: MLflow's own tracking server (`mlflow server`) on a free loopback port, with its
SQLite store and its artifacts in one folder (the demo's: `local-runs/mlflow/`).

It stands in for the tracking server `resource_arn` names: a stack synthesized with that ARN as `mlflow_resource_arn`
sends it in each job's `MlflowConfig` and `MLFLOW_TRACKING_URI`, and where the sagemaker-mlflow plugin would send the
job's calls for that ARN to the managed service, local mode sends them here (local_mode.job_runtime.mlflow_tracking).

The server starts in the background: `start()` returns at once and `url_when_ready()` waits for its health check. A
start costs about 11 s of CPU (MLflow's command line and its server application are each a large import, in two
processes), so the demo starts it first and the job waits for it only when it needs it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moto.core import DEFAULT_ACCOUNT_ID

from local_mode.aws.local_clients import LOCAL_REGION
from local_mode.aws.network import LOOPBACK, free_port

LOCAL_TRACKING_SERVER_ARN = (f"arn:aws:sagemaker:{LOCAL_REGION}:{DEFAULT_ACCOUNT_ID}:"
                             f"mlflow-tracking-server/local-mode")
"""The ARN the local server answers to: a tracking server in local mode's region and account (moto's)."""
STORE_FILE = "mlflow.db"
SERVER_LOG = "server.log"
START_TIMEOUT_SECONDS = 300.0  # a start on a loaded 2-core machine took up to 56 s
_POLL_SECONDS = 0.2
_STOP_GRACE_SECONDS = 10.0


class TrackingServerError(RuntimeError):
    """The tracking server did not start, or stopped."""


@dataclass(frozen=True)
class LoggedRun:
    """A run as the server holds it."""

    experiment_id: str
    run_id: str


def run_page(server_url: str, experiment_id: str, run_id: str) -> str:
    """A run's page in the UI of the MLflow server at `server_url`."""
    return f"{server_url}/#/experiments/{experiment_id}/runs/{run_id}"


class LocalMlflowServer:
    """`mlflow server` on 127.0.0.1, one worker, storing runs in `store_dir/mlflow.db` and artifacts in
    `store_dir/artifacts/`; its output goes to `store_dir/server.log`. Context manager, or `start()` / `stop()`."""

    def __init__(self, store_dir: Path, *, resource_arn: str = LOCAL_TRACKING_SERVER_ARN) -> None:
        self.store_dir = store_dir
        self.resource_arn = resource_arn
        self.url = f"http://{LOOPBACK}:{free_port()}"
        self._process: subprocess.Popen | None = None
        self._ready = threading.Event()
        self._lock = threading.Lock()

    @property
    def store_uri(self) -> str:
        """The backend store, as `mlflow server --backend-store-uri` and MlflowClient take it."""
        return f"sqlite:///{(self.store_dir / STORE_FILE).resolve()}"

    def start(self) -> LocalMlflowServer:
        self.store_dir.mkdir(parents=True, exist_ok=True)
        port = urllib.parse.urlsplit(self.url).port
        with (self.store_dir / SERVER_LOG).open("ab") as log:
            # Its own session, so that stop() ends the command and the server worker it starts together.
            self._process = subprocess.Popen(
                [sys.executable, "-m", "mlflow", "server", "--host", LOOPBACK, "--port", str(port), "--workers", "1",
                 "--backend-store-uri", self.store_uri,
                 "--artifacts-destination", str((self.store_dir / "artifacts").resolve())],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                # Tracking needs none of the server's job execution (GenAI scorers and such), whose runner starts seven
                # more Python processes beside the server (MLflow's MLFLOW_SERVER_ENABLE_JOB_EXECUTION).
                env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"})
        return self

    def url_when_ready(self, timeout: float = START_TIMEOUT_SECONDS) -> str:
        """The server's address once it answers its health check; TrackingServerError if it stopped or did not
        answer within `timeout` seconds, with the end of its log."""
        with self._lock:  # one waiter polls; the others find it ready
            if self._ready.is_set():
                return self.url
            if self._process is None:
                raise TrackingServerError("the MLflow tracking server was never started: call start() first")
            deadline = time.monotonic() + timeout
            while not self._answers():
                if self._process.poll() is not None:
                    raise TrackingServerError(f"the MLflow tracking server exited with code "
                                              f"{self._process.returncode} before it answered:\n{self.log_tail()}")
                if time.monotonic() > deadline:
                    raise TrackingServerError(f"the MLflow tracking server at {self.url} did not answer within "
                                              f"{timeout:.0f} s:\n{self.log_tail()}")
                time.sleep(_POLL_SECONDS)
            self._ready.set()
            return self.url

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=2) as response:
                return response.status == 200
        except OSError:
            return False

    def log_tail(self, lines: int = 20) -> str:
        log = self.store_dir / SERVER_LOG
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:]) if log.is_file() else "(no log)"

    def run_named(self, experiment_name: str, run_name: str) -> LoggedRun | None:
        """The run named `run_name` in the experiment, or None when there is none (through MLflow's REST API)."""
        try:
            experiment = self._call("GET", "experiments/get-by-name", {"experiment_name": experiment_name})
        except urllib.error.HTTPError as error:
            if error.code == 404:  # RESOURCE_DOES_NOT_EXIST: nothing was logged to it
                return None
            raise
        experiment_id = experiment["experiment"]["experiment_id"]
        runs = self._call("POST", "runs/search", {"experiment_ids": [experiment_id], "max_results": 1,
                                                  "filter": f"attributes.run_name = '{run_name}'"}).get("runs", [])
        if not runs:
            return None
        run_id = runs[0]["info"]["run_id"]
        return LoggedRun(experiment_id, run_id)

    def _call(self, method: str, endpoint: str, body: dict[str, Any]) -> dict[str, Any]:
        url = f"{self.url_when_ready()}/api/2.0/mlflow/{endpoint}"
        if method == "GET":
            request = urllib.request.Request(f"{url}?{urllib.parse.urlencode(body)}")
        else:
            request = urllib.request.Request(url, data=json.dumps(body).encode(), method=method,
                                             headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())

    def stop(self) -> None:
        """SIGTERM to the server's session (the command and its worker), SIGKILL after a grace period."""
        process, self._process = self._process, None
        self._ready.clear()
        if process is None:
            return
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(_STOP_GRACE_SECONDS)
        except ProcessLookupError:  # ended already, with every process of its session
            process.wait()
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def __enter__(self) -> LocalMlflowServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
