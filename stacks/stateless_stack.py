"""Everything that can be replaced at will: roles, the trigger, registrar and watchdog Lambdas and their queues, rules,
topic, alarms."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aws_cdk import CfnOutput, Stack
from constructs import Construct

from stacks.alarms import PipelineAlarms
from stacks.config import PipelineConfig
from stacks.execution_role import SageMakerExecutionRole
from stacks.inference_image import InferenceImage
from stacks.job_watchdog import StalledJobWatchdog
from stacks.lambda_bundle import stage_lambda_bundle
from stacks.model_registration import ModelRegistration
from stacks.model_trainer_files import ModelTrainerFiles
from stacks.notifications import JobNotifications
from stacks.shared_resources import export_name, import_shared_resources
from stacks.source_bundle import TrainingSourceBundle
from stacks.source_layout import PROJECT_ROOT
from stacks.stateful_stack import removal_policy_of
from stacks.training_image import DlcImage
from stacks.training_trigger import TrainingTrigger
from stacks.trigger_environment import STATIC_SETTINGS_FILE, trigger_environment, trigger_static_settings


class StatelessStack(Stack):
    """The training pipeline's moving parts, wired to the stateful stack's resources."""

    def __init__(self, scope: Construct, construct_id: str, *, config: PipelineConfig, export_prefix: str,
                 dlc_image: DlcImage | None, inference_image: InferenceImage, build_dir: Path, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        stateful = import_shared_resources(self, export_prefix=export_prefix, data_encrypted_with_key=config.enable_kms)
        data_key = stateful.key if config.enable_kms else None
        execution_role = SageMakerExecutionRole(
            self, "SageMakerExecutionRole",
            data_bucket=stateful.data_bucket, dataset_prefix=config.dataset_prefix,
            artifacts_bucket=stateful.artifacts_bucket, repository=stateful.repository, dlc_image=dlc_image,
            key=data_key, subnet_ids=config.subnet_ids, security_group_ids=config.security_group_ids,
            extra_data_buckets=config.extra_data_buckets, mlflow_resource_arn=config.mlflow_resource_arn,
        ).role
        source_members = config.source_members()
        source_bundle = TrainingSourceBundle(self, "TrainingSourceBundle", members=source_members,
                                             build_dir=build_dir / "training-source")
        source_bundle.grant_read(execution_role, as_channel=config.enable_network_isolation)
        model_trainer = ModelTrainerFiles(self, "ModelTrainerFiles", members=source_members,
                                          source_dir=config.source_dir, bucket=stateful.artifacts_bucket,
                                          build_dir=build_dir / "model-trainer", key=data_key,
                                          log_retention_days=config.log_retention_days,
                                          removal_policy=removal_policy_of(config))
        model_trainer.grant_read(execution_role)
        notifications = JobNotifications(self, "JobNotifications", project_prefix=config.project_prefix,
                                         key=stateful.key, notification_email=config.notification_email)
        image_uri = (dlc_image.uri if dlc_image is not None
                     else stateful.repository.repository_uri_for_tag(config.custom_image_tag))
        environment = trigger_environment(
            config,
            data_bucket=stateful.data_bucket.bucket_name, artifacts_bucket=stateful.artifacts_bucket.bucket_name,
            role_arn=execution_role.role_arn, image_uri=image_uri, source_bundle_uri=source_bundle.s3_uri,
            kms_key_arn=data_key.key_arn if data_key else None, notification_topic_arn=notifications.topic.topic_arn,
        )
        trigger = TrainingTrigger(
            self, "TrainingTrigger",
            asset_dir=stage_lambda_bundle(
                PROJECT_ROOT / "lambda" / "trigger", build_dir / "lambda-trigger",
                generated={STATIC_SETTINGS_FILE: json.dumps(trigger_static_settings(
                    config, bundle_files=source_members, model_trainer=model_trainer.settings), indent=1) + "\n"}),
            environment=environment, data_bucket=stateful.data_bucket, dataset_prefix=config.dataset_prefix,
            marker_names=config.marker_names, project_prefix=config.project_prefix, execution_role=execution_role,
            topic=notifications.topic, key=data_key, environment_key=stateful.key,
            reserved_concurrency=config.trigger_reserved_concurrency,
            timeout_seconds=config.trigger_timeout_seconds, retry_attempts=config.trigger_retry_attempts,
            max_event_age_seconds=config.trigger_max_event_age_seconds,
            log_retention_days=config.log_retention_days, retrain_schedule=config.retrain_schedule,
            removal_policy=removal_policy_of(config),
        )
        registration = ModelRegistration(
            self, "ModelRegistration",
            asset_dir=stage_lambda_bundle(PROJECT_ROOT / "lambda" / "registrar", build_dir / "lambda-registrar"),
            project_prefix=config.project_prefix, quality_metrics=config.model_quality_metrics,
            threshold=config.registration_threshold, inference_image=inference_image,
            inference_instance_type=config.inference_instance_type,
            artifacts_bucket=stateful.artifacts_bucket, topic=notifications.topic, key=data_key,
            environment_key=stateful.key, log_retention_days=config.log_retention_days,
            removal_policy=removal_policy_of(config),
        )
        watchdog = None
        if config.stall_watchdog:
            watchdog = StalledJobWatchdog(
                self, "StalledJobWatchdog",
                asset_dir=stage_lambda_bundle(PROJECT_ROOT / "lambda" / "watchdog", build_dir / "lambda-watchdog"),
                project_prefix=config.project_prefix, stall_minutes=config.stall_minutes,
                check_every_minutes=config.stall_check_minutes, topic=notifications.topic, key=data_key,
                environment_key=stateful.key, log_retention_days=config.log_retention_days,
                removal_policy=removal_policy_of(config),
            )
        PipelineAlarms(self, "Alarms", job_failed_rule=notifications.job_failed_rule,
                       dead_letter_queue=trigger.dead_letter_queue,
                       registration_dead_letter_queue=registration.dead_letter_queue,
                       watchdog=watchdog,
                       topic=notifications.topic)
        # What `aws lambda invoke` and a subscriber need (README, Deploy), exported by name like the stateful stack's.
        for attribute, value in (("TriggerFunctionName", trigger.function.function_name),
                                 ("NotificationTopicArn", notifications.topic.topic_arn)):
            CfnOutput(self, attribute, value=value, export_name=export_name(export_prefix, attribute))
