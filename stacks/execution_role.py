"""The role SageMaker training jobs run as: read the datasets, write artifacts, pull the image, log."""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from stacks.buckets import CHECKPOINT_PREFIX, MODEL_PREFIX
from stacks.compliance import acknowledge_wildcards
from stacks.training_image import DlcImage
from stacks.trigger_modules import trigger_module

experiment_tracking = trigger_module("experiment_tracking.py")

# SageMaker's documented VPC permissions for the execution role ("CreateTrainingJob API: Execution Role
# Permissions"). EC2 authorizes the Describe calls and DeleteNetworkInterfacePermission (whose request names only the
# permission's ID) on no resource type, so those take "*"; the others are authorized on the network interface and
# the subnet and security groups it is created in (the EC2 Service Authorization Reference).
_UNSCOPED_VPC_ACTIONS = ["ec2:DescribeNetworkInterfaces", "ec2:DescribeVpcs", "ec2:DescribeDhcpOptions",
                         "ec2:DescribeSubnets", "ec2:DescribeSecurityGroups", "ec2:DeleteNetworkInterfacePermission"]
_ENI_ACTIONS = ["ec2:CreateNetworkInterface", "ec2:CreateNetworkInterfacePermission", "ec2:DeleteNetworkInterface"]
# What a job's MLflow client does in its run, out of the MLflow actions AWS grants job execution roles in its managed
# policy AmazonSageMakerJobFullAccess (no traces, no artifact listing), plus SearchRuns: a retried or resumed job
# finds its run by name instead of opening a second one (ranker.training.tracking). `sagemaker-mlflow` actions are
# authorized on the tracking server (Service Authorization Reference, "Amazon SageMaker with MLflow"); the
# sagemaker-mlflow plugin signs an MLflow app's calls for the `sagemaker` service (its auth_provider.py), where each
# is authorized as sagemaker:CallMlflowAppApi on the app, which that managed policy grants beside them.
MLFLOW_RUN_ACTIONS = ["sagemaker-mlflow:GetExperimentByName", "sagemaker-mlflow:CreateExperiment",
                      "sagemaker-mlflow:SearchRuns", "sagemaker-mlflow:CreateRun", "sagemaker-mlflow:GetRun",
                      "sagemaker-mlflow:UpdateRun", "sagemaker-mlflow:LogBatch"]
MLFLOW_APP_ACTIONS = ["sagemaker:CallMlflowAppApi"]


class SageMakerExecutionRole(Construct):
    """Least privilege for one training job of this project."""

    def __init__(self, scope: Construct, construct_id: str, *, data_bucket: s3.IBucket, dataset_prefix: str,
                 artifacts_bucket: s3.IBucket, repository: ecr.IRepository, dlc_image: DlcImage | None,
                 key: kms.IKey | None, subnet_ids: tuple[str, ...], security_group_ids: tuple[str, ...],
                 extra_data_buckets: tuple[str, ...] = (), mlflow_resource_arn: str | None = None) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
                             description="SageMaker training jobs of this project")
        data_objects = data_bucket.arn_for_objects(f"{dataset_prefix}*")
        artifact_objects = [artifacts_bucket.arn_for_objects(f"{prefix}*")
                            for prefix in (MODEL_PREFIX, CHECKPOINT_PREFIX)]
        data_bucket.grant_read(self.role, f"{dataset_prefix}*")
        # Buckets outside the project that manual payloads may name as channels: read-only, whole bucket.
        extra_objects = []
        for index, name in enumerate(extra_data_buckets):
            extra_bucket = s3.Bucket.from_bucket_name(self, f"ExtraDataBucket{index}", name)
            extra_bucket.grant_read(self.role)
            extra_objects.append(extra_bucket.arn_for_objects("*"))
        for prefix in (MODEL_PREFIX, CHECKPOINT_PREFIX):
            artifacts_bucket.grant_read_write(self.role, f"{prefix}*")
        repository.grant_pull(self.role)  # includes ecr:GetAuthorizationToken, which has no resource scope
        if dlc_image is not None:
            self.role.add_to_policy(iam.PolicyStatement(
                sid="PullAwsDeepLearningContainer",
                actions=["ecr:BatchCheckLayerAvailability", "ecr:GetDownloadUrlForLayer", "ecr:BatchGetImage"],
                resources=[f"arn:{stack.partition}:ecr:{dlc_image.region}:{dlc_image.registry_account}:"
                           f"repository/{dlc_image.repository_name}"],
            ))
        training_logs = (f"arn:{stack.partition}:logs:{stack.region}:{stack.account}:"
                         "log-group:/aws/sagemaker/TrainingJobs")
        self.role.add_to_policy(iam.PolicyStatement(
            sid="WriteTrainingJobLogs",
            actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
            resources=[training_logs, f"{training_logs}:log-stream:*"],
        ))
        self.role.add_to_policy(iam.PolicyStatement(
            sid="PublishTrainingMetrics",
            actions=["cloudwatch:PutMetricData"],
            resources=["*"],  # PutMetricData has no resource-level permissions; the namespace condition scopes it
            conditions={"StringLike": {"cloudwatch:namespace": "/aws/sagemaker/*"}},
        ))
        if key is not None:
            key.grant_encrypt_decrypt(self.role)
            # The trigger sends the key as VolumeKmsKeyId (instances without local NVMe): SageMaker attaches the
            # encrypted EBS volume through a grant that it creates as this role, which grant_encrypt_decrypt
            # does not allow. Only grants for AWS resources, so the role cannot hand the key to a principal.
            self.role.add_to_policy(iam.PolicyStatement(
                sid="CreateVolumeKeyGrantsForSageMaker",
                actions=["kms:CreateGrant"],
                resources=[key.key_arn],
                conditions={"Bool": {"kms:GrantIsForAWSResource": "true"}},
            ))
        if subnet_ids:
            self._allow_vpc(subnet_ids, security_group_ids)
        if mlflow_resource_arn is not None:
            app = experiment_tracking.resource_kind(mlflow_resource_arn) == "mlflow-app"
            self.role.add_to_policy(iam.PolicyStatement(
                sid="LogRunsToTheProjectsMlflow",
                actions=MLFLOW_RUN_ACTIONS + (MLFLOW_APP_ACTIONS if app else []),
                resources=[mlflow_resource_arn],  # that server or app alone
            ))
        acknowledge_wildcards(
            self.role,
            reason="Object wildcards stay inside this project's buckets and prefixes (datasets/ read-only; models/ "
                   "and checkpoints/ read-write, as SageMaker writes one key per file) and the extra data buckets "
                   "the configuration names (read-only); the s3 and kms action "
                   "wildcards are CDK's read/write grant sets on those objects and the project key; log streams "
                   "are one per job under /aws/sagemaker/TrainingJobs; '*' is only for ecr:GetAuthorizationToken, "
                   "cloudwatch:PutMetricData (limited to SageMaker namespaces), EC2 Describe calls and "
                   "ec2:DeleteNetworkInterfacePermission, which AWS does not scope to resources.",
            actions=["s3:GetObject*", "s3:GetBucket*", "s3:List*", "s3:DeleteObject*", "s3:Abort*",
                     *(["kms:GenerateDataKey*", "kms:ReEncrypt*"] if key is not None else [])],
            resources=[data_objects, *extra_objects, *artifact_objects, f"{training_logs}:log-stream:*", "*",
                       *([f"arn:{stack.partition}:ec2:{stack.region}:{stack.account}:network-interface/*"]
                         if subnet_ids else [])],
        )

    def _allow_vpc(self, subnet_ids: tuple[str, ...], security_group_ids: tuple[str, ...]) -> None:
        stack = Stack.of(self)
        ec2_arn = f"arn:{stack.partition}:ec2:{stack.region}:{stack.account}"
        self.role.add_to_policy(iam.PolicyStatement(
            sid="DescribeVpcAndReleaseInterfaces",
            actions=_UNSCOPED_VPC_ACTIONS,
            resources=["*"],  # no resource-level permissions for these (above)
        ))
        self.role.add_to_policy(iam.PolicyStatement(
            sid="ManageTrainingNetworkInterfaces",
            actions=_ENI_ACTIONS,
            resources=[f"{ec2_arn}:network-interface/*",
                       *(f"{ec2_arn}:subnet/{subnet}" for subnet in subnet_ids),
                       *(f"{ec2_arn}:security-group/{group}" for group in security_group_ids)],
        ))
