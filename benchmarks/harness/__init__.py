"""What every benchmark shares: a result table recorded in its own section of docs/benchmarks.md with the command,
machine and date that produced it (`report`, and `machine` for the machine's line and what every launch on it is
given), the models the tables measure, by name (`models`), the timing protocol every trainer is measured by (`timing`,
and its Lightning callback `lightning_timing`), a launched process timed line by line (`timed_run`), and where the
project's code and the LETOR sample lie (`project_code`).

May import: nothing else of benchmarks.
"""
