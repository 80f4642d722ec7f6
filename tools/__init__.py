"""Developer tools run from the repository root (`python -m tools.<name>`); never shipped with a deployment."""
