"""What the trigger must know about SageMaker training instance types to refuse jobs that cannot work."""

from __future__ import annotations


from training_trigger.container_profiles import instance_family, instance_kind

# GPUs per instance, for the types a ranking job plausibly uses.
# Types missing here are still accepted; only the checks that need the count are skipped for them.
ACCELERATORS_PER_INSTANCE: dict[str, int] = {
    "ml.p3.2xlarge": 1, "ml.p3.8xlarge": 4, "ml.p3.16xlarge": 8, "ml.p3dn.24xlarge": 8,
    "ml.p4d.24xlarge": 8, "ml.p4de.24xlarge": 8, "ml.p5.48xlarge": 8, "ml.p5e.48xlarge": 8, "ml.p5en.48xlarge": 8,
    "ml.g4dn.xlarge": 1, "ml.g4dn.2xlarge": 1, "ml.g4dn.4xlarge": 1, "ml.g4dn.8xlarge": 1, "ml.g4dn.16xlarge": 1,
    "ml.g4dn.12xlarge": 4,
    "ml.g5.xlarge": 1, "ml.g5.2xlarge": 1, "ml.g5.4xlarge": 1, "ml.g5.8xlarge": 1, "ml.g5.16xlarge": 1,
    "ml.g5.12xlarge": 4, "ml.g5.24xlarge": 4, "ml.g5.48xlarge": 8,
    "ml.g6.xlarge": 1, "ml.g6.2xlarge": 1, "ml.g6.4xlarge": 1, "ml.g6.8xlarge": 1, "ml.g6.16xlarge": 1,
    "ml.g6.12xlarge": 4, "ml.g6.24xlarge": 4, "ml.g6.48xlarge": 8,
}

# Families with local NVMe instance storage: CreateTrainingJob refuses VolumeKmsKeyId for them, because their
# storage is encrypted by the instance's hardware.
_LOCAL_NVME_FAMILIES = ("p3dn", "p4d", "p4de", "p5", "p5e", "p5en", "g4dn", "g5", "g6", "g6e", "trn1", "trn1n",
                        "m5d", "c5d", "r5d", "m6id", "c6id", "r6id")

def accelerators(instance_type: str) -> int | None:
    """GPUs per instance; 0 for CPU instances; None when the type is unknown to this table."""
    if instance_type in ACCELERATORS_PER_INSTANCE:
        return ACCELERATORS_PER_INSTANCE[instance_type]
    return 0 if instance_kind(instance_type) == "cpu" else None


def has_local_nvme(instance_type: str) -> bool:
    return instance_family(instance_type) in _LOCAL_NVME_FAMILIES
