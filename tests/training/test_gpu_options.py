"""The GPU-only training options choose the right mechanism, and refuse values they do not know."""

from __future__ import annotations

import pytest
import torch
from ranker.config import ModelConfig, PathSwitches, TrainConfig, parse_config
from ranker.model.losses import LOSSES
from ranker.model.mlp import RankingMLP
from ranker.training import engine
from ranker.training.meter import TrainingMeter
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import bf16_compress_hook


@pytest.mark.parametrize(
    ("device", "allreduce_dtype", "expected"),
    [("cuda", "bf16", bf16_compress_hook), ("cuda", "fp32", None), ("cpu", "bf16", None)],
)
def test_gradient_compression_applies_on_gpu_only(device, allreduce_dtype, expected):
    # Given a device and an all-reduce precision / When the DDP hook is chosen / Then bf16 compression is GPU-only
    assert engine.ddp_comm_hook(torch.device(device), allreduce_dtype) is expected


@pytest.mark.parametrize(("device", "precision", "autocasts"), [
    # Built where there is no GPU (CI), torch's CUDA autocast says it disables itself: this test reads only its type.
    pytest.param("cuda", "bf16", True, marks=pytest.mark.filterwarnings(
        "ignore:CUDA is not available or torch_xla is imported. Disabling autocast:UserWarning")),
    ("cuda", "fp32", False), ("cpu", "bf16", False)])
def test_autocast_follows_precision(device, precision, autocasts):
    # Given a device and a precision / When the autocast context is built / Then only GPU bf16 autocasts
    assert isinstance(engine.autocast(torch.device(device), precision), torch.autocast) is autocasts


def test_unknown_precision_is_refused_naming_the_flag(tmp_path):
    # Given a precision nobody supports / When the configuration is parsed / Then the error names the field and fix
    with pytest.raises(ValueError, match=r"--precision: invalid choice: 'fp16' \(choose from 'bf16', 'fp32'\)"):
        parse_config(["--train", str(tmp_path), "--precision", "fp16"], {}, "test")
    # And a switch's unknown value is refused the same way, where a benchmark sets it
    with pytest.raises(ValueError, match=r"allreduce_dtype: bad value 'fp16': use one of fp32, bf16"):
        PathSwitches(allreduce_dtype="fp16")


@pytest.mark.parametrize(
    ("device", "changes", "captured"),
    [("cuda", {}, True), ("cuda", {"cuda_graph": False}, False), ("cuda", {"compile": True}, False),
     ("cuda", {"switches": PathSwitches(allreduce_dtype="bf16")}, False), ("cpu", {}, False)],
)
def test_the_step_is_captured_on_gpu_unless_something_needs_eager_kernels(device, changes, captured):
    # Given a device and the flags / When the loop asks whether its step is a CUDA graph
    # Then only GPU runs without torch.compile or the bf16 hook (Python per bucket) capture it
    assert engine.uses_cuda_graph(TrainConfig(**changes), torch.device(device)) is captured


def test_on_cpu_the_default_step_is_the_eager_one_and_trains():
    # Given the default config (CUDA graphs on) on the CPU
    torch.manual_seed(0)
    model = RankingMLP(ModelConfig(num_features=6, width=8, num_layers=3, norm="none", dropout=0.0))
    optimizer = engine.build_optimizer(model, TrainConfig(), torch.device("cpu"))
    scheduler = engine.build_scheduler(optimizer, total_steps=4, config=TrainConfig(warmup_fraction=0.5))
    meter = TrainingMeter(torch.device("cpu"))
    step = engine.step_function(model, optimizer, scheduler, LOSSES["listwise"], torch.device("cpu"), TrainConfig(),
                                meter)
    batch = (torch.randn(2, 5, 6), torch.randint(0, 3, (2, 5)).float(), torch.ones(2, 5, dtype=torch.bool))
    before = [parameter.detach().clone() for parameter in model.parameters()]
    with torch.no_grad():
        loss_before = LOSSES["listwise"](model(batch[0]), batch[1], batch[2])
    # When it runs a step / Then the weights moved, the meter holds the step's loss and its 10 documents, and the
    # learning rate is read as a plain number
    step(batch)
    assert meter.steps == 1 and meter.documents.item() == 10
    torch.testing.assert_close(meter.loss_sum, loss_before)
    assert any(not torch.equal(old, new) for old, new in zip(before, model.parameters()))
    assert isinstance(engine.learning_rate(scheduler), float)


@pytest.mark.parametrize("compile_model", [True, False])
def test_the_native_loop_trains_the_model_compiled_exactly_when_asked(tmp_path, compile_model):
    # Given a session with --compile true (or false), on one process
    from sagemaker_distributed import detect_topology

    from benchmarks.gpu.native_harness import NativeHarness, synthetic_session

    session = synthetic_session(ModelConfig(width=8, norm="none", dropout=0.0),
                                TrainConfig(batch_size=4, compile=compile_model), detect_topology({}),
                                torch.device("cpu"), docs_per_query=4, work_dir=tmp_path)
    # When the native harness (train_ddp.py's set-up) builds what its step runs
    trained = NativeHarness.build(session, total_steps=4).model
    # Then it runs torch.compile's wrapper of its own model exactly when asked (compiled lazily, on the first step)
    assert isinstance(trained, torch._dynamo.eval_frame.OptimizedModule) is compile_model
    assert isinstance(engine.unwrap(trained), RankingMLP)
