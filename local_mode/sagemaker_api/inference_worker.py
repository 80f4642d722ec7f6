"""TorchServe's Python backend serving one model, as in AWS's PyTorch inference containers, spoken to over stdin and
stdout instead of TorchServe's Java frontend and socket.

    MODEL_DIR=... PYTHONPATH=$MODEL_DIR/code python -P inference_worker.py MODEL_DIR

The container starts TorchServe with the handler service of the SageMaker PyTorch inference toolkit
(`sagemaker_pytorch_serving_container.handler_service:handle`) and `code/` of the unpacked model on PYTHONPATH;
each TorchServe worker loads the model with `ts.model_loader.TsModelLoader` and answers predictions with
`ts.service.Service.predict`. This process does the same: requests arrive as JSON lines
`{"body": <base64>, "content_type": ..., "accept": ...}`, answers leave as `{"status": ..., "content_type": ...,
"body": <base64>}`, decoded from the binary response TorchServe's worker sends its frontend. `-P` keeps this
file's folder off the path: the handler imports what the artifact carries and what the container has installed.
"""

from __future__ import annotations

import base64
import json
import os
import struct
import sys
from pathlib import Path
from typing import Any

import ts
from ts.metrics.metric_cache_yaml_impl import MetricsCacheYamlImpl
from ts.model_loader import TsModelLoader

HANDLER = "sagemaker_pytorch_serving_container.handler_service:handle"
MODEL_NAME = "model"  # the name the toolkit registers its one model under (DEFAULT_TS_MODEL_NAME)


def decode_predict_response(message: bytes) -> dict[str, Any]:
    """The first answer of TorchServe's predict response (ts.protocol.otf_message_handler.create_predict_response):
    int fields big-endian, strings and bodies length-prefixed."""
    offset = 0

    def integer() -> int:
        nonlocal offset
        (value,) = struct.unpack_from("!i", message, offset)
        offset += 4
        return value

    def chunk() -> bytes:
        nonlocal offset
        length = integer()
        value = message[offset:offset + length]
        offset += length
        return bytes(value)

    code, _message = integer(), chunk()
    _request_id, content_type, status, _phrase = chunk(), chunk(), integer(), chunk()
    for _ in range(integer()):  # response headers
        chunk(), chunk()
    return {"batch_status": code, "status": status, "content_type": content_type.decode(), "body": chunk()}


def main(model_dir: str) -> None:
    # Answers go to the original stdout; anything the handler or the toolkit prints goes to stderr, the log.
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    metrics = MetricsCacheYamlImpl(config_file_path=str(Path(ts.__file__).parent / "configs" / "metrics.yaml"))
    metrics.initialize_cache()
    service = TsModelLoader().load(MODEL_NAME, model_dir, handler=HANDLER, gpu_id=None, batch_size=1,
                                   metrics_cache=metrics)
    service.set_cl_socket(None)
    print(json.dumps({"ready": True}), file=answers, flush=True)
    for number, line in enumerate(sys.stdin):
        request = json.loads(line)
        headers = [{"name": b"Content-Type", "value": request["content_type"].encode()}]
        if request.get("accept"):
            headers.append({"name": b"Accept", "value": request["accept"].encode()})
        batch = [{"requestId": str(number).encode(), "headers": headers,
                  "parameters": [{"name": "body", "value": base64.b64decode(request["body"]),
                                  "contentType": request["content_type"]}]}]
        answer = decode_predict_response(service.predict(batch))
        print(json.dumps({**answer, "body": base64.b64encode(answer["body"]).decode()}), file=answers, flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
