"""The model the pipeline's tests train with the project's entry points: small, over the raw features, so that a job's
own work is a fraction of starting Python and torch (the shipped model's per-feature embedding costs up to seconds a
step on 2 busy cores). The pipeline is under test there, not the model."""

SMALL_MODEL = {"width": 16, "num-layers": 2, "encoding": "none", "embedding-width": 0}
"""Hyperparameters, as a manifest or DemoOptions passes them to the script."""
