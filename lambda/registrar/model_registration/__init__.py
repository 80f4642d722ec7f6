"""The registrar's logic: job state event -> DescribeTrainingJob -> registration plan -> Model Registry.

Imports only the standard library, botocore and aws_lambda_powertools, as the trigger does; `aws_clients` and
`observability` are the trigger's own modules, linked into this package so both functions set up alike.
"""
