"""Invokes a Lambda handler of the stacks (the trigger unless told otherwise) as the Lambda runtime would: its own
process, its code folder as the code root (the synthesized asset, or the source folder lambda/trigger/), the stack's
environment, and the endpoint URLs of the local services."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from local_mode.aws.local_clients import LOCAL_REGION, dummy_credentials_environment
from local_mode.aws.synthesized_app import PROJECT_ROOT

TRIGGER_ASSET = PROJECT_ROOT / "lambda" / "trigger"
TRIGGER_HANDLER = "handler.lambda_handler"

# The runtime hands the handler a context object; this one carries the fields Powertools reads.
_INVOKE = """
import importlib, json, os, sys, uuid
from types import SimpleNamespace
module_name, function_name = os.environ["_HANDLER"].rsplit(".", 1)
handler = getattr(importlib.import_module(module_name), function_name)
context = SimpleNamespace(function_name=os.environ["AWS_LAMBDA_FUNCTION_NAME"], function_version="$LATEST",
                          memory_limit_in_mb=512,
                          invoked_function_arn=os.environ["LOCAL_MODE_FUNCTION_ARN"],
                          aws_request_id=str(uuid.uuid4()), log_group_name="local", log_stream_name="local",
                          get_remaining_time_in_millis=lambda: 60000)
result = handler(json.load(sys.stdin), context)
print("LOCAL_MODE_RESULT " + json.dumps(result, default=str))
"""


def invoke_trigger(event: dict[str, Any], *, account: str, function_environment: dict[str, str], s3_url: str,
                   sns_url: str, sagemaker_url: str, code_dir: Path = TRIGGER_ASSET,
                   handler: str = TRIGGER_HANDLER, function_name: str = "training-trigger",
                   logs_url: str | None = None) -> dict[str, Any]:
    """Run `handler(event, context)` from `code_dir`; returns its result (raises with its log when it crashes).
    `logs_url`: the CloudWatch Logs endpoint, for a function that reads logs."""
    # `_HANDLER` and `LAMBDA_TASK_ROOT` are what the Lambda runtime sets; the code folder comes first on the path.
    env = {"PATH": os.environ.get("PATH", ""), **function_environment, **dummy_credentials_environment(),
           "AWS_ENDPOINT_URL_S3": s3_url, "AWS_ENDPOINT_URL_SNS": sns_url, "AWS_ENDPOINT_URL_SAGEMAKER": sagemaker_url,
           "AWS_LAMBDA_FUNCTION_NAME": function_name, "PYTHONPATH": str(code_dir), "_HANDLER": handler,
           "LAMBDA_TASK_ROOT": str(code_dir),
           "LOCAL_MODE_FUNCTION_ARN": f"arn:aws:lambda:{LOCAL_REGION}:{account}:function:{function_name}",
           **({"AWS_ENDPOINT_URL_CLOUDWATCH_LOGS": logs_url} if logs_url else {})}
    completed = subprocess.run([sys.executable, "-c", _INVOKE], input=json.dumps(event), cwd=code_dir, env=env,
                               capture_output=True, text=True, timeout=120)
    results = [line for line in completed.stdout.splitlines() if line.startswith("LOCAL_MODE_RESULT ")]
    if completed.returncode != 0 or not results:
        raise RuntimeError(f"the {function_name} handler failed (exit {completed.returncode}):\n"
                           f"{(completed.stdout + completed.stderr)[-3000:]}")
    return json.loads(results[-1].removeprefix("LOCAL_MODE_RESULT "))
