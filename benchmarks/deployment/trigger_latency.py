"""Trigger Lambda latency: cold import of the handler module, first AWS client, and building one request.

Run: `.venv/bin/python -m benchmarks.deployment.trigger_latency [--runs 7]`. Prints a table and records it in
docs/benchmarks.md. Targets: cold import < 300 ms, building a request < 1 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import timeit

from benchmarks.harness.project_code import PROJECT_ROOT, TRAINING_CODE
from benchmarks.harness.report import markdown_table, provenance, write_section

TRIGGER_DIR = PROJECT_ROOT / "lambda" / "trigger"
IMPORT_TARGET_MS, BUILD_TARGET_MS = 300.0, 1.0
# The trigger's package, the metric definitions it is configured with, and the tests' stack environment.
for path in (TRIGGER_DIR, TRAINING_CODE, PROJECT_ROOT / "tests" / "unit"):
    sys.path.insert(0, str(path))

# Each run is a fresh interpreter, so nothing is cached in sys.modules: the Lambda cold start's import phase.
_COLD_IMPORT = """
import time
start = time.perf_counter()
import handler
imported = time.perf_counter()
from training_trigger.aws_clients import sagemaker_client
sagemaker_client()
print((imported - start) * 1000, (time.perf_counter() - imported) * 1000)
"""


def _environ() -> dict[str, str]:
    from trigger.sample_inputs import stack_environ

    return {**os.environ, **stack_environ(), "AWS_DEFAULT_REGION": "eu-west-1", "PYTHONPATH": str(TRIGGER_DIR)}


def cold_start_ms(runs: int) -> tuple[list[float], list[float]]:
    imports, clients = [], []
    environ = _environ()
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", _COLD_IMPORT], cwd=TRIGGER_DIR, env=environ, check=True,
                             capture_output=True, text=True).stdout.split()
        imports.append(float(out[0]))
        clients.append(float(out[1]))
    return imports, clients


def build_request_ms(repeat: int = 2000) -> float:
    from training_trigger.request import build_training_job_request
    from trigger.sample_inputs import job_spec, stack_settings

    settings, spec = stack_settings(), job_spec(distribution="torch_distributed", instance_type="ml.g5.12xlarge")
    json.dumps(build_training_job_request(spec, settings))  # warm-up, and proof it serialises
    times = timeit.repeat(lambda: build_training_job_request(spec, settings), number=repeat, repeat=5)
    return min(times) / repeat * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="fresh interpreters for the cold import (median)")
    args = parser.parse_args()
    imports, clients = cold_start_ms(args.runs)
    build = build_request_ms()
    median_import = statistics.median(imports)
    rows = [
        ["cold `import handler` (median)", f"{median_import:.0f} ms", f"< {IMPORT_TARGET_MS:.0f} ms",
         "pass" if median_import < IMPORT_TARGET_MS else "FAIL"],
        ["first SageMaker client, on first invocation (median)", f"{statistics.median(clients):.0f} ms", "-", "-"],
        ["`build_training_job_request` (best of 5 x 2000)", f"{build * 1000:.0f} µs", f"< {BUILD_TARGET_MS:.0f} ms",
         "pass" if build < BUILD_TARGET_MS else "FAIL"],
    ]
    table = markdown_table(["measure", "value", "target", "result"], rows)
    print(table)
    write_section("trigger_latency", "Trigger Lambda latency",
                  f"{provenance()}\n- Runs: {args.runs} fresh interpreters\n\n{table}\n\n"
                  "The SageMaker, S3 and SNS clients are created on first use (once per execution environment): "
                  "loading a service model costs the time in the second row, paid by the first invocation.")


if __name__ == "__main__":
    main()
