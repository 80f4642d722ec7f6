"""The folder tree a SageMaker training container sees under /opt/ml, one per local host.

Local mode gives each host (`algo-1`, `algo-2`, ...) its own tree and points SAGEMAKER_BASE_DIR at it, as the
sagemaker-training toolkit allows outside a container.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

# SageMaker names a homogeneous cluster's only instance group this way.
INSTANCE_GROUP_NAME = "homogeneousCluster"


def host_names(instance_count: int) -> list[str]:
    """`algo-1` .. `algo-N`, the container host names SageMaker assigns."""
    return [f"algo-{index}" for index in range(1, instance_count + 1)]


CONTAINER_ROOT = PurePosixPath("/opt/ml")


@dataclass(frozen=True)
class HostFolder:
    """One host's /opt/ml."""

    root: Path

    def container_path(self, path: str) -> Path | None:
        """Where the container's `/opt/ml/...` path lies in this host's folder; None outside that tree."""
        container = PurePosixPath(path)
        if not container.is_relative_to(CONTAINER_ROOT) or ".." in container.parts:
            return None
        return self.root.joinpath(*container.relative_to(CONTAINER_ROOT).parts)

    @property
    def config_dir(self) -> Path:
        return self.root / "input" / "config"

    @property
    def data_dir(self) -> Path:
        return self.root / "input" / "data"

    def channel_dir(self, channel: str) -> Path:
        return self.data_dir / channel

    @property
    def code_dir(self) -> Path:
        return self.root / "code"

    @property
    def model_dir(self) -> Path:
        return self.root / "model"

    @property
    def output_dir(self) -> Path:
        return self.root / "output"

    @property
    def output_data_dir(self) -> Path:
        return self.output_dir / "data"

    @property
    def failure_file(self) -> Path:
        """An algorithm writes its own failure reason here; the service reports it as the FailureReason."""
        return self.output_dir / "failure"

    @property
    def checkpoint_dir(self) -> Path:
        return self.root / "checkpoints"

    @property
    def log_file(self) -> Path:
        """What CloudWatch would hold for this host's log stream."""
        return self.root / "training.log"

    def create(self) -> None:
        for folder in (self.config_dir, self.data_dir, self.code_dir, self.model_dir, self.output_data_dir,
                       self.checkpoint_dir):
            folder.mkdir(parents=True, exist_ok=True)

    def write_config(self, *, hyperparameters: dict[str, str], resource_config: dict[str, Any],
                     input_data_config: dict[str, Any]) -> None:
        """The three files SageMaker writes to /opt/ml/input/config before the container starts."""
        for name, content in (("hyperparameters.json", hyperparameters), ("resourceconfig.json", resource_config),
                              ("inputdataconfig.json", input_data_config)):
            (self.config_dir / name).write_text(json.dumps(content, indent=2))


def resource_config(*, current_host: str, hosts: list[str], instance_type: str) -> dict[str, Any]:
    """resourceconfig.json for `current_host` in a homogeneous cluster."""
    return {
        "current_host": current_host,
        "current_instance_type": instance_type,
        "current_group_name": INSTANCE_GROUP_NAME,
        "hosts": hosts,
        "instance_groups": [{"instance_group_name": INSTANCE_GROUP_NAME, "instance_type": instance_type,
                             "hosts": hosts}],
        "network_interface_name": "eth0",
    }


def input_data_config(channels: list[dict[str, Any]], default_input_mode: str) -> dict[str, Any]:
    """inputdataconfig.json: per channel, the modes the container may care about."""
    config = {}
    for channel in channels:
        entry = {
            "TrainingInputMode": channel.get("InputMode", default_input_mode),
            "S3DistributionType": channel["DataSource"]["S3DataSource"].get("S3DataDistributionType",
                                                                             "FullyReplicated"),
            "RecordWrapperType": channel.get("RecordWrapperType", "None"),
        }
        if "ContentType" in channel:
            entry["ContentType"] = channel["ContentType"]
        config[channel["ChannelName"]] = entry
    return config
