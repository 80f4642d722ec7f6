"""The model the pipeline's tests train with the project's entry points: small, over the raw features, so that a job's
own work is a fraction of starting Python and torch (the shipped model's per-feature embedding costs up to seconds a
step on 2 busy cores). The pipeline is under test there, not the model: its jobs leave out model.pt2 too (torch.export's
trace, seconds of CPU at the end of each job), which nothing of the pipeline reads (tests/serving and the container
parity tests check it)."""

SMALL_MODEL = {"width": 16, "num-layers": 2, "encoding": "none", "embedding-width": 0, "portable-export": "false"}
"""Hyperparameters, as a manifest or DemoOptions passes them to the script."""
