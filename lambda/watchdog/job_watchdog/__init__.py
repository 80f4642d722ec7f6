"""The stalled-job watchdog's logic: the project's training jobs -> those in `Training` whose logs fell silent ->
StopTrainingJob and a notification.

Imports only the standard library, botocore and aws_lambda_powertools, as the trigger does; `aws_clients` and
`observability` are the trigger's own modules, linked into this package so every function sets up alike.
"""
