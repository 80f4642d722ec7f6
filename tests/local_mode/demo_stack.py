"""The context the demo pipeline's stack is synthesized with, for every test that reads that stack.

Synthesized for the PyTorch 2.2.0 container, the one whose rules allow every distribution, so that one stack's trigger
accepts the jobs of each mode the tests run. A test that only reads the template uses the same context: a test
session then synthesizes the app once for all of them (local_mode.synthesized_app caches by context and sources).
"""

DEMO_CONTEXT = {"framework_version": "2.2.0"}
"""`-c key=value` context, as LocalPipeline and local_mode.synthesized_app.synthesize take it."""
