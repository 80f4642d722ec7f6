"""What the tests synthesize the app for where several test files read or run one stack: a test session synthesizes
each once (local_mode.aws.synthesized_app caches assemblies by context and sources).
"""

import json
from pathlib import Path

from local_mode.demo import DemoOptions
from local_mode.aws.synthesized_app import PROJECT_ROOT

DEMO_CONTEXT = {"framework_version": "2.2.0"}
"""The demo pipeline's `-c key=value` context: the PyTorch 2.2.0 container, the one whose rules allow every
distribution, so that one stack's trigger accepts the jobs of each mode the tests run. A test that only reads the
template uses it too."""

BORING_MODEL = DemoOptions(
    source_dir=PROJECT_ROOT / "examples" / "lightning-boring-model",
    entry_point="train.py",
    metric_definitions=json.dumps([{"Name": "steps", "Regex": "steps=([0-9]+)"}]),
)
"""Lightning's stock BoringModel brought to the pipeline, with a metric definition reading the step count its train.py
prints: the options every test of it starts from (those that shape the stack: its folder, entry point and metric
definitions)."""

PLAIN_SCRIPTS = DemoOptions(
    source_dir=Path(__file__).parent / "byo" / "plain_scripts", entry_point="train.py", instance_count=2
)
"""byo/plain_scripts as a 2-host job: its stack's default entry point is the plain DDP script train.py, which like the
other scripts of test_bring_your_own and test_watchdog imports nothing of this project; the watchdog's tests name their
scripts beside it in their manifests, and test_environment_and_sharding its record_job_view.py (which reads the job
through sagemaker_distributed, bundled beside any source folder): one stack for the three files."""
