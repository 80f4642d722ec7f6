"""A registered model package deployed on this machine, as far as local parts allow: its model where SageMaker puts
it, and AWS's PyTorch inference toolkit answering requests for it.

    package = sagemaker.describe_model_package(ModelPackageName=arn)
    with LocalModelEndpoint(package, s3=s3, work_dir=Path("local-runs/endpoint")) as endpoint:
        answer = endpoint.invoke(b'{"instances": [[0.1, 0.5, ...]]}', "application/json")

What an endpoint built from the package does, in order: SageMaker unpacks the container's `ModelDataUrl` into
/opt/ml/model and starts the container's `Image` with its `Environment`; the PyTorch inference image starts TorchServe
with the SageMaker handler service and `/opt/ml/model/code` on PYTHONPATH; the handler service imports
`SAGEMAKER_PROGRAM` and calls its `model_fn` once, then `input_fn`, `predict_fn`, `output_fn` per request. Locally the
folder stands in for /opt/ml (`SAGEMAKER_BASE_DIR`), this Python for the image's, and inference_worker.py beside
this module runs TorchServe's own Python backend without its Java frontend. An image that is not an AWS PyTorch
inference image is refused: local mode cannot stand in for a model server it does not know, and a training image has
none.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from local_mode.job_runtime.artifacts import unpack_archive
from local_mode.aws.s3_transfer import split_s3_uri

WORKER = Path(__file__).resolve().parent / "inference_worker.py"
SERVING_REPOSITORY = "pytorch-inference"  # AWS's PyTorch inference DLCs (sagemaker.image_uris, image_scope=inference)


class EndpointError(Exception):
    """The package cannot be served; the message says what the endpoint would have failed on."""


@dataclass(frozen=True)
class Invocation:
    """What InvokeEndpoint answers: the status, the response's content type and body."""

    status: int
    content_type: str
    body: bytes


class LocalModelEndpoint:
    """Context manager: one worker process for the package's model, stopped on exit."""

    def __init__(self, package: Mapping[str, Any], *, s3: Any, work_dir: Path, python: str = sys.executable) -> None:
        containers = package["InferenceSpecification"]["Containers"]
        if len(containers) != 1:
            raise EndpointError(f"the package has {len(containers)} containers: local mode serves one")
        self._container = containers[0]
        repository = self._container["Image"].rsplit("/", 1)[-1].split(":")[0].split("@")[0]
        if repository != SERVING_REPOSITORY:
            raise EndpointError(f"Image={self._container['Image']!r} is no AWS PyTorch inference image "
                                f"({SERVING_REPOSITORY}): an endpoint needs a model server, which training images "
                                f"lack; register the model with the stack's inference image")
        self._s3, self._work_dir, self._python = s3, work_dir, python
        self._process: subprocess.Popen[str] | None = None
        self._log: TextIO | None = None
        self.model_dir = work_dir / "opt" / "ml" / "model"
        self.log_file = work_dir / "endpoint.log"

    def __enter__(self) -> "LocalModelEndpoint":
        self._unpack_model()
        environment = {name: value for name, value in os.environ.items()
                       if not name.startswith(("PYTHON", "SM_", "SAGEMAKER_"))}
        environment |= {**self._container.get("Environment", {}),
                        "SAGEMAKER_BASE_DIR": str(self.model_dir.parent),
                        "PYTHONPATH": str(self.model_dir / "code"), "OMP_NUM_THREADS": "1"}
        self._log = self.log_file.open("w", encoding="utf-8")
        self._process = subprocess.Popen([self._python, "-P", str(WORKER), str(self.model_dir)], env=environment,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
                                         text=True, cwd=self._work_dir)
        if not self._process.stdout.readline():
            reason = self._log_tail()
            self.__exit__(None, None, None)
            raise EndpointError(f"the model server exited while loading the model (ping would fail): {reason}")
        return self

    def __exit__(self, *_: object) -> None:
        if self._process is not None:
            self._process.stdin.close()
            try:
                self._process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process.stdout.close()
            self._process = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def invoke(self, body: bytes, content_type: str, accept: str | None = None) -> Invocation:
        """One InvokeEndpoint request: `Body`, `ContentType`, `Accept`."""
        if self._process is None:
            raise EndpointError("the endpoint is not running: use it inside `with`")
        self._process.stdin.write(json.dumps({"body": base64.b64encode(body).decode(), "content_type": content_type,
                                              "accept": accept}) + "\n")
        self._process.stdin.flush()
        line = self._process.stdout.readline()
        if not line:
            raise EndpointError(f"the model server exited during a request: {self._log_tail()}")
        answer = json.loads(line)
        return Invocation(status=answer["status"], content_type=answer["content_type"],
                          body=base64.b64decode(answer["body"]))

    def _unpack_model(self) -> None:
        bucket, key = split_s3_uri(self._container["ModelDataUrl"])
        self.model_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as scratch:
            archive = Path(scratch) / "model.tar.gz"
            self._s3.download_file(bucket, key, str(archive))
            unpack_archive(archive, self.model_dir)

    def _log_tail(self) -> str:
        self._log.flush()
        return " | ".join(self.log_file.read_text(encoding="utf-8").strip().splitlines()[-5:])
