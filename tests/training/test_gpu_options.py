"""The GPU-only training options choose the right mechanism, and refuse values they do not know."""

from __future__ import annotations

import pytest
import torch
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import bf16_compress_hook

from ranker import engine
from ranker.config import parse_config


@pytest.mark.parametrize(
    ("device", "allreduce_dtype", "expected"),
    [("cuda", "bf16", bf16_compress_hook), ("cuda", "fp32", None), ("cpu", "bf16", None)],
)
def test_gradient_compression_applies_on_gpu_only(device, allreduce_dtype, expected):
    # Given a device and an all-reduce precision / When the DDP hook is chosen / Then bf16 compression is GPU-only
    assert engine.ddp_comm_hook(torch.device(device), allreduce_dtype) is expected


@pytest.mark.parametrize(("device", "precision", "autocasts"), [("cuda", "bf16", True), ("cuda", "fp32", False),
                                                                ("cpu", "bf16", False)])
def test_autocast_follows_precision(device, precision, autocasts):
    # Given a device and a precision / When the autocast context is built / Then only GPU bf16 autocasts
    assert isinstance(engine.autocast(torch.device(device), precision), torch.autocast) is autocasts


@pytest.mark.parametrize("flag", ["--precision", "--allreduce-dtype"])
def test_unknown_precision_is_refused_naming_the_flag(tmp_path, flag):
    # Given a precision nobody supports / When the configuration is parsed / Then the error names the field and fix
    with pytest.raises(ValueError, match=r"(precision|allreduce_dtype): bad value 'fp16': use bf16 or fp32"):
        parse_config(["--train", str(tmp_path), flag, "fp16"], {}, "test")
