"""The registrar Lambda: each completed project job's model (a tuning job's best trial's) goes into its dataset's Model
Registry package group."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from constructs import Construct

from stacks.buckets import MODEL_PREFIX
from stacks.compliance import acknowledge_wildcards, skip_checkov
from stacks.config import RegistrationThreshold
from stacks.function_names import REGISTRAR_SERVICE_NAME as POWERTOOLS_SERVICE_NAME
from stacks.inference_image import InferenceImage
from stacks.notifications import training_job_state_pattern, tuning_job_state_pattern
from stacks.project_function import add_project_function

REGISTERED_JOB_STATES = ("Completed",)
# Where the registrar writes each job's quality report: beside the job's model.tar.gz, and nowhere else.
QUALITY_REPORT_OBJECTS = f"{MODEL_PREFIX}*/output/model_quality.json"
# What it reads: each job's model.tar.gz, for the serving handler a package needs (and nothing else of the bucket).
MODEL_ARTIFACT_OBJECTS = f"{MODEL_PREFIX}*/output/model.tar.gz"


def registrar_environment(*, project_prefix: str, quality_metrics: tuple[str, ...],
                          threshold: RegistrationThreshold | None, inference_image: InferenceImage,
                          inference_instance_type: str, notification_topic_arn: str) -> dict[str, str]:
    """Every variable lambda/registrar reads (model_registration/settings.py), and nothing else."""
    return {
        "PROJECT_PREFIX": project_prefix,
        "MODEL_QUALITY_METRICS": ",".join(quality_metrics),
        "THRESHOLD_METRIC": threshold.metric if threshold else "",
        "THRESHOLD_MINIMUM": repr(threshold.minimum) if threshold else "",
        "INFERENCE_IMAGE_URI": inference_image.uri,
        "INFERENCE_FRAMEWORK_VERSION": inference_image.framework_version,
        "INFERENCE_INSTANCE_TYPE": inference_instance_type,
        "NOTIFICATION_TOPIC_ARN": notification_topic_arn,
        "POWERTOOLS_SERVICE_NAME": POWERTOOLS_SERVICE_NAME,
        "POWERTOOLS_METRICS_NAMESPACE": project_prefix,
        "POWERTOOLS_LOG_LEVEL": "INFO",
    }


class ModelRegistration(Construct):
    """Rules on the project's `Completed` training and tuning job state changes invoking the registrar, its role, logs
    and queue."""

    def __init__(self, scope: Construct, construct_id: str, *, asset_dir: Path, project_prefix: str,
                 quality_metrics: tuple[str, ...], threshold: RegistrationThreshold | None,
                 inference_image: InferenceImage, inference_instance_type: str, artifacts_bucket: s3.IBucket,
                 topic: sns.ITopic,
                 key: kms.IKey | None, environment_key: kms.IKey, log_retention_days: int,
                 removal_policy: RemovalPolicy) -> None:
        super().__init__(scope, construct_id)
        parts = add_project_function(
            self, name="registrar", calls="SageMaker, S3, SNS", role_description="The model registration Lambda",
            description="Registers a completed training job's model, or a completed tuning job's best, in the "
                        "SageMaker Model Registry",
            asset_dir=asset_dir, environment=registrar_environment(
                project_prefix=project_prefix, quality_metrics=quality_metrics, threshold=threshold,
                inference_image=inference_image, inference_instance_type=inference_instance_type,
                notification_topic_arn=topic.topic_arn),
            environment_key=environment_key, key=key, timeout_seconds=60, reserved_concurrency=None,
            retry_attempts=2, max_event_age_seconds=6 * 3600, log_retention_days=log_retention_days,
            removal_policy=removal_policy)
        self.dead_letter_queue, self.log_group, self.role, self.function = (
            parts.dead_letter_queue, parts.log_group, parts.role, parts.function)
        skip_checkov(self.function.node.default_child, "CKV_AWS_115",
                     "One invocation per completed training job: the job quota bounds concurrency far below the "
                     "account's, and reserving some would take it from every other function.")
        self.completed_rule = events.Rule(
            self, "TrainingJobCompletedRule",
            description=f"{project_prefix} training jobs that completed: register their models",
            event_pattern=training_job_state_pattern(project_prefix, REGISTERED_JOB_STATES),
            targets=[parts.rule_target()],
        )
        # A tuning job's winner is registered when the tuning job completes (its trials are left to it).
        self.tuning_completed_rule = events.Rule(
            self, "TuningJobCompletedRule",
            description=f"{project_prefix} hyperparameter tuning jobs that completed: register their best models",
            event_pattern=tuning_job_state_pattern(project_prefix, REGISTERED_JOB_STATES),
            targets=[parts.rule_target()],
        )
        self._grant(project_prefix=project_prefix, artifacts_bucket=artifacts_bucket, topic=topic)

    def _grant(self, *, project_prefix: str, artifacts_bucket: s3.IBucket, topic: sns.ITopic) -> None:
        stack = Stack.of(self)
        arn = f"arn:{stack.partition}:sagemaker:{stack.region}:{stack.account}"
        training_jobs = f"{arn}:training-job/{project_prefix}-*"
        tuning_jobs = f"{arn}:hyper-parameter-tuning-job/{project_prefix}-*"
        groups = f"{arn}:model-package-group/{project_prefix}-*"
        packages = f"{arn}:model-package/{project_prefix}-*"  # a group's versions: model-package/<group>/<n>
        self.log_group.grant_write(self.role)
        topic.grant_publish(self.role)
        artifacts_bucket.grant_put(self.role, QUALITY_REPORT_OBJECTS)
        artifacts_bucket.grant_read(self.role, MODEL_ARTIFACT_OBJECTS)
        self.role.add_to_policy(iam.PolicyStatement(
            sid="ReadProjectTrainingJobs",
            actions=["sagemaker:DescribeTrainingJob", "sagemaker:ListTags"],
            resources=[training_jobs],
        ))
        self.role.add_to_policy(iam.PolicyStatement(
            sid="ReadProjectTuningJobs",
            actions=["sagemaker:DescribeHyperParameterTuningJob"],
            resources=[tuning_jobs],
        ))
        self.role.add_to_policy(iam.PolicyStatement(
            sid="RegisterInProjectPackageGroups",
            # CreateModelPackage is authorized on the new version and on the group it joins.
            actions=["sagemaker:DescribeModelPackageGroup", "sagemaker:CreateModelPackageGroup",
                     "sagemaker:CreateModelPackage"],
            resources=[groups, packages],
        ))
        acknowledge_wildcards(
            self.role,
            reason="The registrar reads training and tuning jobs named with the project prefix (a tuning job's trials "
                   "carry its name), registers models only in "
                   "package groups named with it (one per dataset, created on first use), reads only each job's "
                   "model artifact (CDK's read grant set: s3:GetObject*, s3:GetBucket*, s3:List*) and writes only "
                   "the quality report beside it (put grant: s3:Abort*), and uses the project key for "
                   "those objects, the topic and its queue (kms:GenerateDataKey*, kms:ReEncrypt*).",
            actions=["s3:Abort*", "s3:GetObject*", "s3:GetBucket*", "s3:List*", "kms:GenerateDataKey*",
                     "kms:ReEncrypt*"],
            resources=[training_jobs, tuning_jobs, groups, packages,
                       artifacts_bucket.arn_for_objects(QUALITY_REPORT_OBJECTS),
                       artifacts_bucket.arn_for_objects(MODEL_ARTIFACT_OBJECTS)],
        )
