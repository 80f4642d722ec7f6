"""Naive baselines, written the way a typical user writes them: the yardstick for the project's trainers.

May import: `benchmarks.harness`.
"""
