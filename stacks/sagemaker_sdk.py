"""The SageMaker Python SDK v2, imported quietly: synthesis reads its image tables to resolve image URIs offline
(~2 s to import, so only synthesis does), and the SDK would otherwise print its config-file lookups
(`sagemaker.config INFO - Not applying SDK defaults from location: ...`) and its v3 migration notice into the output
of every synthesis."""

from __future__ import annotations

import importlib
import logging
import os
from types import ModuleType


def sdk_module(name: str) -> ModuleType:
    """`sagemaker.<name>` (`image_uris`, `fw_utils`), imported without the SDK's notices."""
    # The SDK sets the `sagemaker.config` logger to INFO only when it finds no level set on it
    # (sagemaker/config/config_utils.py, get_sagemaker_config_logger): WARNING keeps its lookups out, not its warnings.
    logging.getLogger("sagemaker.config").setLevel(logging.WARNING)
    # The SDK's own switch for its v2 -> v3 notice (sagemaker/deprecations.py).
    os.environ.setdefault("SAGEMAKER_SUPPRESS_V2_WARNING", "1")
    return importlib.import_module(f"sagemaker.{name}")
