"""SageMaker's cluster health check (CreateTrainingJob's `InfraCheckConfig`): which jobs run it, and how the
request asks for it.

AWS's API reference says only that "a SageMaker-provided health check tests the health of instance hardware and
cluster network connectivity" before the job's code runs. Cluster network connectivity exists between instances, and
a bad instance or link costs a multi-instance job the whole cluster's time: by default the check runs for jobs of two
or more instances (docs/reliability.md, Cluster health check).

Standard library only: synthesis reads the modes from here (stacks/config.py).
"""

from __future__ import annotations

MULTI_INSTANCE, ALWAYS, NEVER = "multi_instance", "always", "never"
MODES = (MULTI_INSTANCE, ALWAYS, NEVER)


def runs_health_check(mode: str, instance_count: int) -> bool:
    """Whether a job of `instance_count` instances runs the check under the stack's `infra_check` mode."""
    return mode == ALWAYS or (mode == MULTI_INSTANCE and instance_count > 1)


def request_config() -> dict[str, bool]:
    """`InfraCheckConfig` as SageMaker Python SDK v3's `ModelTrainer.with_infra_check_config()` sends it (and SDK
    v2's `PyTorch(enable_infra_check=True)`); a job without the check sends none, as either SDK does by default."""
    return {"EnableInfraCheck": True}
