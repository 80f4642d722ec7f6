"""SageMaker's side of the pipeline, on this machine: what the service answers and what it sends.

Its HTTP endpoint (awsJson1.1, as boto3 speaks it); the training-job and tuning-job APIs behind it, with the
service's request validation and errors; a tuning job's search over its ranges; the state-change events SageMaker
sends EventBridge; and a registered model deployed as an endpoint with AWS's PyTorch inference toolkit. Each training
job it accepts is run by the job runtime.

May import: `local_mode.job_runtime`, `local_mode.container`, `local_mode.aws`.
"""
