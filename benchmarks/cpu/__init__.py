"""A job's CPU side, around the GPU's step: LETOR parsing, conversion and the streaming loader against what the GPU
trainers consume, the entry points' imports and a whole short job from launch to exit (`data_pipeline`), and how a
finished run's process ends (`process_exit`).

May import: `benchmarks.harness`.
"""
