"""What every benchmark shares: a result table recorded in its own section of docs/benchmarks.md with the command,
machine and date that produced it (`report`), the models the tables measure, by name (`models`), the timing protocol
every trainer is measured by (`timing`, and its Lightning callback `lightning_timing`), and where the project's code
lives (`project_code`).

May import: nothing else of benchmarks.
"""
