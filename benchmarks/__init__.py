"""Benchmarks: each prints a table and records it in docs/benchmarks.md."""
