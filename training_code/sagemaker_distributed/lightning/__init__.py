"""Lightning on SageMaker: the cluster environment for every launcher the toolkit uses, the one-call DDP strategy,
the spot-interruption checkpoint and a quiet console, for any LightningModule."""

from sagemaker_distributed.lightning.console import quiet_lightning_console
from sagemaker_distributed.lightning.environment import SageMakerEnvironment
from sagemaker_distributed.lightning.spot_checkpoint import SpotInterruptionCheckpoint
from sagemaker_distributed.lightning.strategy import SageMakerDDPStrategy, strategy

__all__ = ["SageMakerDDPStrategy", "SageMakerEnvironment", "SpotInterruptionCheckpoint", "quiet_lightning_console",
           "strategy"]
