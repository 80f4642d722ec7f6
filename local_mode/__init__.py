"""Local mode: the whole pipeline on one machine, without Docker or an AWS account.

Local S3/SNS (moto's server) and a local SageMaker endpoint run on 127.0.0.1; the trigger code runs unchanged,
only its endpoint URLs differ. Run it with `python -m local_mode` (or `make demo`).
"""
