"""Local mode: the whole pipeline on one machine, without Docker or an AWS account.

Local S3/SNS (moto's server) and a local SageMaker endpoint run on 127.0.0.1; the trigger code runs unchanged,
only its endpoint URLs differ. Run it with `python -m local_mode` (or `make demo`).

The modules here are the front: the command line (`cli`), the demo (`demo`, `tuning_demo`, `job_summary`) and the
deployed pipeline they run (`pipeline`). Below them, each sub-package imports only those after it in this order:
`sagemaker_api` (SageMaker's API and events), `job_runtime` (a training job run as the service's hosts run it),
`container` (what the training container does on each host), `aws` (the AWS around SageMaker). Each sub-package's
docstring names what it may import; tests/unit/test_import_layers.py holds them to it (`python -m tools.import_graph
local_mode` prints the graph).
"""
