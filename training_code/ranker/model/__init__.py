"""The scoring model, its losses and metrics, and the artifacts a finished run leaves."""
