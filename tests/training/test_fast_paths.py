"""The fast paths are chosen in one place (ranker.gpu.fast_paths) from what the torch offers: a torch with everything takes
them all on GPU, torch 2.2 (or a newer torch told to act as 2.2) takes the portable path and the line says why, and the
portable path computes what the fast one does."""

from __future__ import annotations

import dataclasses
import re

import pytest
import torch
from ranker.config import ModelConfig, PathSwitches, TrainConfig
from ranker.gpu import fast_paths
from ranker.gpu.fast_paths import TORCH_2_2, Capabilities, as_older, capabilities, choose
from ranker.gpu.fused_linear import FusedLayers
from ranker.model.mlp import RankingMLP
from ranker.training import engine

EVERYTHING = Capabilities("torch 9.9", float32_output_gemm=True, device_bound_init=True, triton_kernels=True)
FAST_PATHS = ("fused_layers", "cuda_graph", "fused_data_parallel", "sharded_update", "fused_embedding")


def taken(path: fast_paths.TrainingPath) -> set[str]:
    return {name for name in FAST_PATHS if getattr(path, name)}


def test_a_torch_with_everything_takes_every_fast_path_on_two_gpus():
    path = choose(TrainConfig(), "cuda", 2, "nccl", EVERYTHING)
    assert taken(path) == set(FAST_PATHS) and path.not_taken == () and path.bind_device
    assert "not taken" not in path.describe()


def test_torch_2_2_takes_the_portable_path_and_keeps_the_cuda_graph_naming_why():
    # Given torch 2.2's capabilities on two GPUs over NCCL
    path = choose(TrainConfig(), "cuda", 2, "nccl", TORCH_2_2)
    # Then the step is still captured, the layers are autocast's and DDP reduces; and init is not bound to the GPU
    assert taken(path) == {"cuda_graph"} and path.data_parallel == "DDP" and not path.bind_device
    line = path.describe()
    assert line.startswith("training path on torch 2.2: autocast bf16 Linear + ReLU, DDP, CUDA graph. Fast paths not")
    # And the one line names each fast path not taken with its reason
    reasons = dict(path.not_taken)
    assert reasons["fused bf16 layers"] == "torch 2.2 has no torch.mm(out_dtype=)"
    assert reasons["FusedDataParallel"] == "needs the fused bf16 layers"
    assert reasons["fused per-feature embeddings"] == "no Triton 3.3 or later beside torch 2.2"
    assert set(reasons) == {"fused bf16 layers", "FusedDataParallel", "sharded update", "fused per-feature embeddings"}
    assert all(f"{name}: {why}" in line for name, why in path.not_taken)


def test_forcing_torch_2_2_on_a_newer_torch_takes_away_what_2_2_lacks_and_says_so():
    forced = as_older(EVERYTHING, "2.2")
    assert dataclasses.replace(forced, source="") == dataclasses.replace(TORCH_2_2, source="")
    assert forced.source == "torch 9.9 as torch 2.2 (RANKER_AS_TORCH=2.2)"
    # And the environment variable is how a run asks for it
    assert capabilities({"RANKER_AS_TORCH": "2.2"}) == as_older(fast_paths.probe(), "2.2")
    with pytest.raises(ValueError, match=r"RANKER_AS_TORCH: bad value '2.1': use one of 2.2"):
        capabilities({"RANKER_AS_TORCH": "2.1"})


def test_probe_reads_the_running_torch():
    # The overload that the fused layers' weight gradient needs, and the init argument: read from this torch itself
    probed = fast_paths.probe()
    assert probed.float32_output_gemm == ("dtype" in torch.ops.aten.mm.overloads())
    assert probed.source == f"torch {torch.__version__}"


def test_the_triton_kernels_need_a_triton_at_least_as_new_as_the_one_they_were_compiled_with(monkeypatch):
    # Given the installed Triton's release as its package metadata gives it
    releases = {"3.2.0": False, "3.3.1": True, "3.6.0": True, "3.10.0+git1a2b3c": True}
    for release, expected in releases.items():
        monkeypatch.setattr(fast_paths.importlib.metadata, "version", lambda name, release=release: release)
        # Then the probe allows the kernels from 3.3 on, comparing releases as numbers (3.10 is after 3.3)
        assert fast_paths.probe().triton_kernels is expected, release

    def missing(name):
        raise fast_paths.importlib.metadata.PackageNotFoundError(name)

    # And without Triton (CPU builds of torch) they never run
    monkeypatch.setattr(fast_paths.importlib.metadata, "version", missing)
    assert fast_paths.probe().triton_kernels is False


@pytest.mark.parametrize(
    ("device", "world_size", "backend", "config", "off", "why"),
    [("cpu", 1, "", TrainConfig(), "fused bf16 layers", "CPU run"),
     ("cuda", 1, "", TrainConfig(precision="fp32"), "fused bf16 layers", "--precision fp32"),
     ("cuda", 1, "", TrainConfig(compile=True), "CUDA graph", "--compile true (Inductor's kernels instead)"),
     ("cuda", 1, "", TrainConfig(cuda_graph=False), "CUDA graph", "--cuda-graph false"),
     ("cuda", 2, "smddp", TrainConfig(), "FusedDataParallel", "backend smddp, not nccl"),
     ("cuda", 2, "nccl", TrainConfig(switches=PathSwitches(data_parallel="ddp")), "FusedDataParallel",
      "switched off (data_parallel='ddp')"),
     ("cuda", 2, "nccl", TrainConfig(switches=PathSwitches(allreduce_dtype="bf16")), "CUDA graph",
      "the bf16 all-reduce hook runs Python per bucket"),
     ("cuda", 2, "nccl", TrainConfig(switches=PathSwitches(shard_optimizer=False)), "sharded update",
      "switched off (shard_optimizer=False)"),
     ("cpu", 1, "", TrainConfig(), "fused per-feature embeddings", "CPU run"),
     ("cuda", 1, "", TrainConfig(compile=True), "fused per-feature embeddings", "--compile true (Inductor fuses instead)"),
     ("cuda", 1, "", TrainConfig(switches=PathSwitches(fused_embedding=False)), "fused per-feature embeddings",
      "switched off (fused_embedding=False)")],
)
def test_each_fast_path_not_taken_is_named_with_its_reason(device, world_size, backend, config, off, why):
    path = choose(config, device, world_size, backend, EVERYTHING)
    assert dict(path.not_taken)[off] == why


def test_on_cpu_the_loop_trains_the_plain_model_and_nothing_else():
    model = RankingMLP(ModelConfig(num_features=6, width=8, num_layers=3))
    assert engine.wrap_for_training(model, torch.device("cpu"), 1, TrainConfig()) is model


def test_the_fused_layers_wrapper_scores_like_the_plain_model_and_trains_its_parameters():
    # Given the plain model (the portable path's layers) and the same model run through the fused bf16 layers
    torch.manual_seed(0)
    model = RankingMLP(ModelConfig(num_features=12, width=32, num_layers=4, norm="none", dropout=0.0))
    fused = FusedLayers(model)
    features = torch.randn(3, 5, 12)
    # Then both score alike (bf16 operands against float32: a bf16 rounding apart) from the very same parameters
    torch.testing.assert_close(fused(features).float(), model(features), atol=0.05, rtol=0.02)
    assert dict(fused.named_parameters()) == {f"module.{name}": p for name, p in model.named_parameters()}
    assert engine.unwrap(fused) is model
    # And the gradients land on the model's parameters, close to the float32 ones
    fused(features).float().sum().backward()
    fused_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model(features).sum().backward()
    for fused_grad, grad in zip(fused_grads, (p.grad for p in model.parameters())):
        torch.testing.assert_close(fused_grad, grad, atol=0.1, rtol=0.05)


def test_the_fast_path_switches_are_not_flags(tmp_path):
    # The ablations' switches are set by benchmarks through TrainConfig(switches=...), never by a job's flags
    from ranker.config import build_parser, parse_config

    help_text = build_parser().format_help()
    for name in ("fused-layers", "data-parallel", "shard-optimizer", "allreduce-dtype", "fused-embedding", "switches"):
        assert f"--{name}" not in help_text
    with pytest.raises(ValueError, match=re.escape("unknown flag(s) ['--data-parallel', 'ddp']")):
        parse_config(["--train", str(tmp_path), "--data-parallel", "ddp"], {}, "test")
