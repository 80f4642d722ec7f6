"""The AWS around SageMaker, on this machine: moto's server (S3, SNS, IAM, CloudWatch Logs, the Model Registry) on a
loopback port and boto3 clients for it, MLflow's tracking server standing in for SageMaker's managed MLflow, S3
transfers as SageMaker makes them, S3's events and EventBridge's matching, the CDK app synthesized and its resources
made on moto's server, its Lambda functions invoked as the Lambda runtime invokes them, and the watchdog's schedule.

May import: nothing else of local mode.
"""
