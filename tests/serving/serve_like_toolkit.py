"""Loads an unpacked model artifact's handler as the sagemaker-pytorch-inference toolkit does, and answers requests.

    python serve_like_toolkit.py MODEL_DIR REQUESTS_JSON

Run with only MODEL_DIR/code on PYTHONPATH (torchserve's set-up: sagemaker_pytorch_serving_container.torchserve),
so the handler can import nothing the artifact does not carry. As sagemaker_inference.transformer.Transformer does:
import the module named by SAGEMAKER_PROGRAM (default `inference.py`), call `model_fn(model_dir)` once, then per
request decode the body to text only for the toolkit's UTF-8 types (JSON, CSV), take `*/*` or no Accept as the
default accept (application/json), and run input_fn -> predict_fn -> output_fn. Prints, as JSON, each response or
the error a request raised, and where the handler's modules were imported from.
"""

from __future__ import annotations

import importlib
import json
import os
import sys

UTF8_TYPES = ("application/json", "text/csv")
DEFAULT_ACCEPT = "application/json"


def main(model_dir: str, requests_file: str) -> None:
    module_name = os.environ.get("SAGEMAKER_PROGRAM", "inference.py").removesuffix(".py")
    handler = importlib.import_module(module_name)
    model = handler.model_fn(model_dir)
    responses = []
    with open(requests_file) as handle:
        requests = json.load(handle)
    for request in requests:
        body = request["body"].encode()
        content_type, accept = request["content_type"], request.get("accept")
        if content_type in UTF8_TYPES:
            body = body.decode("utf-8")
        if not accept or accept == "*/*":
            accept = DEFAULT_ACCEPT
        try:
            data = handler.input_fn(body, content_type)
            responses.append({"body": handler.output_fn(handler.predict_fn(data, model), accept)})
        except Exception as error:  # the toolkit answers with the message of whatever the handler raised
            responses.append({"error": f"{type(error).__name__}: {error}"})
    modules = {name: sys.modules[name].__file__ for name in (module_name, "ranker", "sagemaker_distributed")
               if name in sys.modules}
    print(json.dumps({"responses": responses, "modules": modules}))


if __name__ == "__main__":
    main(*sys.argv[1:])
