"""One training job, run as SageMaker's training hosts run it around the container: the job's record (status,
secondary status, metrics), a folder per host filled as the service fills it (config, channels staged from S3 and
named by their objects, the source bundle, checkpoints synced both ways), each host's log stream, a tracked job's
tracking server address and MLflow run, and the model and output packed and uploaded at the end. What runs inside each
host is the container's.

May import: `local_mode.container`, `local_mode.aws`.
"""
