"""What local mode needs of the stacks' functions, in a module without the CDK (importing aws_cdk starts jsii's Node
process): the Powertools service names that tell the registrar and the watchdog apart, and the log group the watchdog
reads."""

REGISTRAR_SERVICE_NAME = "model-registration"
WATCHDOG_SERVICE_NAME = "stalled-job-watchdog"
# Where SageMaker writes every training job's output, one stream per host: `<job name>/algo-<n>-<epoch seconds>`.
TRAINING_LOG_GROUP = "/aws/sagemaker/TrainingJobs"
