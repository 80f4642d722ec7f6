"""The trigger's logic: event -> TriggerRequest -> TrainingJobSpec -> CreateTrainingJob request -> submission.

Imports only the standard library, botocore and aws_lambda_powertools: the Lambda runtime provides botocore and
the bundle ships Powertools. The SageMaker Python SDK is never imported here (it is far too large for Lambda).
"""
