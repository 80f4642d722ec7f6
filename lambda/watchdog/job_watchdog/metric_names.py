"""The metrics each sweep puts out (Powertools' EMF, in the namespace and `service` dimension of the function's
environment). Importing nothing, so the stack's tests can read the names without creating the function's logger and
metrics, which take their settings from the environment when first imported."""

JOBS_CHECKED = "TrainingJobsChecked"
STALLED_JOBS_STOPPED = "StalledJobsStopped"
JOBS_UNCHECKED = "TrainingJobsUnchecked"  # stacks/job_watchdog.py alarms on it (UNCHECKED_JOBS_METRIC)
