"""PyTorch's own data parallelism against the project's hand-written reduction, on 2 GPUs, in one run.

    python -m benchmarks.gpu.data_parallel_library         # on a 2-GPU machine: every variant at widths 1024 and 4096
    python -m benchmarks.gpu.data_parallel_library --widths 16 --features 8 --batch-size 64 --warmup-steps 2 \\
        --steps-per-window 2 --windows 3                   # CPU smoke run: 2 gloo ranks, tiny model

Every variant trains the same RankingMLP (Session.build_model, the same initial weights) on the same synthetic queries
(benchmarks.gpu.project_trainers.benchmark_session) with the same step (forward under bf16 autocast, listwise loss,
backward, AdamW, the run's warm-up and cosine schedule: benchmarks.gpu.native_harness.NativeHarness; ZeRO's functional
AdamW keeps a fixed learning rate, see `zero_overlap`), and is timed by the same protocol as
benchmarks/gpu/gpu_scaling.py (warm-up, then the median of timed windows). Only the data parallelism differs:
the project's hand-written path (FusedDataParallel, the sharded AdamW update beside the backward pass) against DDP, DDP with a comm hook, ZeroRedundancyOptimizer overlapped with DDP and FSDP2.

Each 2-GPU variant runs in a torchrun launch of its own, so that one that fails or hangs costs only its own rows; the
1-GPU references (same layers, step mode and AdamW, no data parallelism) that its scaling efficiency is measured
against share one launch. Results: a table on stdout and in docs/benchmarks.md, raw JSON lines in --raw-dir.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks.ddp_zero_hook import hook_with_zero_step
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook, bf16_compress_hook
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.distributed.tensor import DTensor
from torch.nn.parallel import DistributedDataParallel

from benchmarks.gpu.native_harness import NativeHarness
from benchmarks.harness.machine import SAFE_NCCL_ENV, gpu_machine_description
from benchmarks.harness.project_code import DOCS_PER_QUERY
from benchmarks.harness.models import PLAIN_MLP, benchmark_model, model_line
from benchmarks.gpu.project_trainers import benchmark_session, join_process_group
from benchmarks.harness.report import (BENCHMARKS_DOC, command_line, markdown_table, measured_at, provenance,
                                       write_section)
from benchmarks.harness.timing import StepWindows, summarise
import sagemaker_distributed as distributed
from ranker.training import engine
from ranker.config import PathSwitches
from ranker.model.losses import LOSSES
from ranker.training.session import Session

# Batches of synthetic data per rank; epochs reshuffle them, so the step never waits on data whatever the run's length.
BATCHES_OF_DATA = 8
SECTION = "data-parallel-library"


# --- the project's hand-written path: the one place that knows how the project builds it ----------------------------


def hand_written(session: Session, total_steps: int, switches: PathSwitches = PathSwitches()) -> NativeHarness:
    """The project's trainer as train_ddp.py builds it (NativeHarness.build: engine.wrap_for_training and
    engine.build_optimizer) on the fast paths `switches` leaves on: by default, on several GPUs, FusedDataParallel
    with ShardedAdamW updating each rank's shard beside the backward pass; on one GPU the project's step without a
    wrapper. Fused bf16 layers, the step a CUDA graph."""
    train = dataclasses.replace(session.config.train, switches=switches)
    session = dataclasses.replace(session, config=dataclasses.replace(session.config, train=train))
    torch.manual_seed(train.seed)
    return NativeHarness.build(session, total_steps=total_steps)


# --- PyTorch's own answers, in plain torch around the project's model and step ---------------------------------------


def project_model(session: Session) -> nn.Module:
    """The benchmark's RankingMLP on this rank's device (autocast's Linear + ReLU under the step's bf16 autocast),
    with the same initial weights in every variant and on every rank."""
    torch.manual_seed(session.config.train.seed)
    return session.build_model()


def adamw(parameters, session: Session, implementation: str) -> torch.optim.AdamW:
    """AdamW with the run's settings, its `fused` or `foreach` kernels on GPU (the default path on CPU)."""
    train = session.config.train
    return torch.optim.AdamW(parameters, lr=train.learning_rate, weight_decay=train.weight_decay,
                             **{implementation: session.device.type == "cuda"})


def ddp(model: nn.Module, session: Session) -> DistributedDataParallel:
    """DDP as the project configures it: gradients written straight into the buckets, the graph declared static."""
    device_ids = [session.device] if session.device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=device_ids, gradient_as_bucket_view=True, static_graph=True)


def library_harness(session: Session, model: nn.Module, optimizer, total_steps: int, mode: str,
                    schedule_of=None) -> NativeHarness:
    """The project's step and loop around a library-wrapped model: replayed from a CUDA graph in `graph` mode (after
    the warm-up DDP needs, ranker.gpu.captured_step), else eager. `schedule_of`: the optimizer the learning-rate schedule
    drives, where the step's `optimizer` is not one. Its `path` is the project's with the fused layers and
    FusedDataParallel switched off (autocast layers, the step as `mode` runs it); the library's wrapper reduces."""
    train = dataclasses.replace(session.config.train, cuda_graph=mode == "graph", compile=False,
                                switches=PathSwitches(fused_layers=False, data_parallel="ddp"))
    scheduler = engine.build_scheduler(schedule_of or optimizer, total_steps, train)
    path = engine.training_path(train, session.device, session.topology.world_size)
    return NativeHarness(model, optimizer, scheduler, session.training_batches(), LOSSES[train.loss], session.device,
                         train, path)


def compiled_if(model: nn.Module, mode: str) -> nn.Module:
    return torch.compile(model) if mode == "compiled" else model


def no_data_parallel(session: Session, total_steps: int, mode: str, implementation: str = "fused") -> NativeHarness:
    """One GPU, autocast layers: the reference for the library variants."""
    model = compiled_if(project_model(session), mode)
    return library_harness(session, model, adamw(model.parameters(), session, implementation), total_steps, mode)


def ddp_variant(session: Session, total_steps: int, mode: str, comm_hook: Callable | None = None) -> NativeHarness:
    model = ddp(project_model(session), session)
    if comm_hook is not None:
        model.register_comm_hook(None, comm_hook)
    return library_harness(session, model, adamw(model.parameters(), session, "fused"), total_steps, mode)


class UpdateInCommHook:
    """The step's optimizer where ZeroRedundancyOptimizer(overlap_with_ddp=True) updates the parameters inside DDP's
    comm hook (ddp_zero_hook): `step` has nothing left to do (ZeRO's own must not be called in the loop), and
    `zero_grad` clears the gradients through ZeRO."""

    def __init__(self, zero: ZeroRedundancyOptimizer):
        self.zero = zero

    def step(self) -> None:
        """The update ran in the comm hook, during the backward pass."""

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.zero.zero_grad(set_to_none)


def zero_overlap(session: Session, total_steps: int, mode: str) -> NativeHarness:
    """ZeRO stage 1 overlapped with DDP's all-reduces. The functional AdamW that `overlap_with_ddp` requires keeps its
    step counts as host tensors, which the fused kernel does not take (a fused AdamW given host step counts fails,
    pytorch#104767): it runs foreach. It runs eager: a CUDA graph would freeze the bias correction computed from those
    host counts. Its learning rate stays the one it was built with (it reads its own defaults, not the schedule's)."""
    model = ddp(project_model(session), session)
    train = session.config.train
    zero = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW, overlap_with_ddp=True,
                                   lr=train.learning_rate, weight_decay=train.weight_decay, foreach=True)
    model.register_comm_hook(None, hook_with_zero_step(allreduce_hook, model, zero))
    return library_harness(session, model, UpdateInCommHook(zero), total_steps, mode, schedule_of=zero)


def fsdp2(session: Session, total_steps: int, mode: str) -> NativeHarness:
    """FSDP2: each Linear its own unit, parameters gathered in bf16 and kept from forward to backward (the model is
    small: no re-gather in the backward pass), gradients reduce-scattered in float32."""
    model = project_model(session)
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in model.modules():
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mp_policy=policy, reshard_after_forward=False)
    fully_shard(model, mp_policy=policy, reshard_after_forward=False)
    return library_harness(session, compiled_if(model, mode), adamw(model.parameters(), session, "fused"),
                           total_steps, mode)


# --- the variants ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    name: str
    gpus: int
    what: str
    build: Callable[[Session, int, str], NativeHarness]
    """(session, total steps, mode) -> the harness that trains it."""
    hand_written: bool = False
    layers: str = "autocast"
    """`fused` (ranker.gpu.fused_linear) or `autocast` (Linear + ReLU under bf16 autocast)."""
    mode: str = "graph"
    """How the step runs on GPU: `graph` (one CUDA graph replay per step), `eager` or `compiled` (torch.compile)."""
    adamw: str = "fused"
    """AdamW's implementation: `fused` or `foreach`."""
    needs: str = ""
    """What it needs beyond a CPU and gloo; a CPU smoke run reports this instead of running it."""
    eager_if_capture_fails: bool = False
    """Measured eager (the capture's failure reported beside it) where its step cannot be captured."""

    @property
    def runs_on_cpu(self) -> bool:
        return not self.needs


HAND_WRITTEN_NEEDS = "CUDA and NCCL (elsewhere the project's engine picks DDP)"
VARIANTS = {variant.name: variant for variant in [
    # 1-GPU references: the same layers, step mode and AdamW with no data parallelism.
    Variant("project-step", 1, "the project's step: fused layers, CUDA graph, fused AdamW",
            lambda session, steps, mode: hand_written(session, steps), layers="fused"),
    Variant("autocast-graph", 1, "autocast Linear + ReLU, CUDA graph, fused AdamW", no_data_parallel),
    Variant("autocast-eager", 1, "autocast Linear + ReLU, eager, fused AdamW", no_data_parallel, mode="eager"),
    Variant("autocast-eager-foreach", 1, "autocast Linear + ReLU, eager, foreach AdamW",
            partial(no_data_parallel, implementation="foreach"), mode="eager", adamw="foreach"),
    Variant("autocast-compiled", 1, "autocast Linear + ReLU, torch.compile, fused AdamW", no_data_parallel,
            mode="compiled", needs="CUDA (Inductor's CPU kernels are not what is measured)"),
    # The hand-written path and its ablations.
    Variant("hand-written", 2, "FusedDataParallel + sharded AdamW beside the backward pass",
            lambda session, steps, mode: hand_written(session, steps), hand_written=True, layers="fused",
            needs=HAND_WRITTEN_NEEDS),
    Variant("hand-written-replicated", 2, "FusedDataParallel (all-reduce), whole AdamW per rank",
            lambda session, steps, mode: hand_written(session, steps, PathSwitches(shard_optimizer=False)),
            hand_written=True, layers="fused", needs=HAND_WRITTEN_NEEDS),
    # PyTorch's own answers.
    Variant("ddp-fused-layers", 2, "DDP (bucket view, static graph) over the project's fused layers",
            lambda session, steps, mode: hand_written(session, steps, PathSwitches(data_parallel="ddp")),
            layers="fused"),
    Variant("ddp", 2, "DDP (bucket view, static graph), built-in fp32 all-reduce", ddp_variant),
    Variant("ddp-bf16-hook", 2, "DDP + bf16_compress_hook", partial(ddp_variant, comm_hook=bf16_compress_hook),
            needs="NCCL (the bf16 hook refuses gloo)", eager_if_capture_fails=True),
    Variant("ddp-zero-overlap", 2, "DDP + ZeroRedundancyOptimizer(overlap_with_ddp=True) via ddp_zero_hook",
            zero_overlap, mode="eager", adamw="foreach", needs="NCCL (overlap_with_ddp refuses gloo)"),
    Variant("fsdp2", 2, "FSDP2 fully_shard per Linear, bf16 parameters, fp32 reduce-scatter", fsdp2, mode="eager"),
    Variant("fsdp2-compiled", 2, "the same FSDP2 model under torch.compile", fsdp2, mode="compiled",
            needs="CUDA (Inductor's CPU kernels are not what is measured)"),
]}
# What the decision table compares: (what is decided, the hand-written variant, the library variants it must beat).
LIBRARY = [name for name, variant in VARIANTS.items() if variant.gpus > 1 and not variant.hand_written]
DECISIONS = [
    ("FusedDataParallel in place of DDP (same fused layers, whole update on every rank)", "hand-written-replicated",
     ["ddp-fused-layers"]),
    ("the sharded AdamW update against the library's sharding", "hand-written",
     ["ddp-zero-overlap", "fsdp2", "fsdp2-compiled"]),
    ("the hand-written path as a whole against the best library path", "hand-written", LIBRARY),
]


def reference(variant: Variant, measured: dict, results: list[dict]) -> dict | None:
    """The 1-GPU result at the same width with the same layers, AdamW and step mode as `measured` was run in (on CPU
    every step runs eager)."""
    for candidate in results:
        single = VARIANTS[candidate["trainer"]]
        if (single.gpus == 1 and candidate["width"] == measured["width"] and candidate["mode"] == measured["mode"]
                and (single.layers, single.adamw) == (variant.layers, variant.adamw)):
            return candidate
    return None


# --- one torchrun worker: measures its variants at every width ----------------------------------------------------


def ranks_agree(model: nn.Module) -> bool | None:
    """Whether every rank holds bit-identical parameters (None where they are sharded or there is one rank): a
    replicated variant whose captured step did not really reduce would drift apart, each rank on its own data."""
    parameters = [parameter.detach() for parameter in model.parameters()]
    if not dist.is_initialized() or any(isinstance(parameter, DTensor) for parameter in parameters):
        return None
    flat = torch.cat([parameter.float().reshape(-1) for parameter in parameters])
    highest = flat.clone()
    dist.all_reduce(highest, op=dist.ReduceOp.MAX)
    same = torch.tensor(float(torch.equal(flat, highest)), device=flat.device)
    dist.all_reduce(same, op=dist.ReduceOp.MIN)
    return bool(same.item())


def measure(variant: Variant, mode: str, width: int, args: argparse.Namespace, topology, device) -> dict:
    windows = StepWindows(args.warmup_steps, args.steps_per_window, args.windows, device)
    session = benchmark_session(benchmark_model(PLAIN_MLP, width, args.features), args.batch_size // DOCS_PER_QUERY,
                                topology, device, BATCHES_OF_DATA)
    started = time.perf_counter()
    harness = variant.build(session, windows.total_steps, mode)
    loss_sum = harness.run(windows.total_steps, on_step=windows.step_done)
    elapsed = time.perf_counter() - started
    result = summarise(variant.name, PLAIN_MLP, width, args.features, args.batch_size, windows)
    optimizer = getattr(harness.optimizer, "zero", harness.optimizer)  # the ZeRO behind an UpdateInCommHook
    return {**dataclasses.asdict(result), "mode": mode, "setup_seconds": elapsed - sum(windows.window_seconds),
            "mean_loss": float(loss_sum) / windows.total_steps, "ranks_agree": ranks_agree(harness.model),
            "wrapper": type(harness.model).__name__, "optimizer": type(optimizer).__name__}


def run_worker(args: argparse.Namespace) -> None:
    topology = distributed.detect_topology()
    device = distributed.device_for(topology)
    join_process_group(topology, device)
    try:
        for name in args.run_variants.split(","):
            variant = VARIANTS[name]
            if device.type == "cpu" and not variant.runs_on_cpu:
                raise SystemExit(f"{name}: needs {variant.needs}; run it on a GPU machine")
            # On CPU the step runs eager whatever the variant's mode (no CUDA graphs there).
            mode = "eager" if args.eager or device.type == "cpu" else variant.mode
            for width in args.widths:
                record = measure(variant, mode, width, args, topology, device)
                if topology.is_main:
                    with args.results.open("a") as handle:
                        handle.write(json.dumps(record) + "\n")
                    print(f"{name} width={width} mode={mode} samples/s={record['samples_per_second']:,.0f}",
                          flush=True)
                gc.collect()  # the harness's graph, buffers and NCCL work go before the next one is built
                if device.type == "cuda":
                    torch.cuda.empty_cache()
    finally:
        distributed.shutdown()


# --- the launcher: one torchrun per 2-GPU variant, one for the 1-GPU references -------------------------------------


@dataclass(frozen=True)
class Launch:
    variants: tuple[str, ...]
    gpus: int
    eager: bool = False


def plan_launches(names: list[str], gpus: int) -> list[Launch]:
    """The uncompiled 1-GPU references share a launch; every other variant has one of its own (compiled ones last:
    the slowest to start)."""
    selected = [VARIANTS[name] for name in names]
    shared = tuple(v.name for v in selected if v.gpus == 1 and v.mode != "compiled")
    alone = [Launch((v.name,), 1 if v.gpus == 1 else gpus) for v in selected if v.name not in shared]
    alone.sort(key=lambda launch: VARIANTS[launch.variants[0]].mode == "compiled")
    return ([Launch(shared, 1)] if shared else []) + alone


def worker_command(launch: Launch, args: argparse.Namespace, results: Path) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={launch.gpus}",
            "-m", "benchmarks.gpu.data_parallel_library", "--run-variants", ",".join(launch.variants),
            "--widths", ",".join(str(width) for width in args.widths), "--features", str(args.features),
            "--batch-size", str(args.batch_size), "--warmup-steps", str(args.warmup_steps),
            "--steps-per-window", str(args.steps_per_window), "--windows", str(args.windows),
            "--results", str(results), *(["--eager"] if launch.eager else [])]


def run_launch(launch: Launch, args: argparse.Namespace, raw_dir: Path) -> str | None:
    """Runs one torchrun launch to its end or its timeout; None if it succeeded, else why not."""
    log_path = raw_dir / f"{'-'.join(launch.variants)}{'-eager' if launch.eager else ''}.log"
    env = {**os.environ, **SAFE_NCCL_ENV}
    if torch.cuda.is_available():
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(index) for index in range(launch.gpus))
    with log_path.open("w") as log:
        process = subprocess.Popen(worker_command(launch, args, raw_dir / "results.jsonl"), env=env, stdout=log,
                                   stderr=subprocess.STDOUT)
        try:
            code = process.wait(timeout=args.launch_timeout)
        except subprocess.TimeoutExpired:
            # torchrun passes SIGTERM on to its workers (each in a session of its own) and kills them if they linger
            process.terminate()
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            return f"timed out after {args.launch_timeout:.0f} s ({log_path.name})"
    if code == 0:
        return None
    return f"{last_exception(log_path.read_text()) or f'exit code {code}'} ({log_path.name})"


def last_exception(log: str) -> str | None:
    """The last exception a worker printed (`[rank0]: ValueError: ...`), not torchrun's report that a child failed."""
    raised = [match.group(1) for match in re.finditer(r"^(?:\[rank\d+\]: )?([\w.]*(?:Error|Exception|Failed): .*)$",
                                                       log, re.MULTILINE)
              if "ChildFailedError" not in match.group(1)]
    return raised[-1].strip()[:200].replace("|", "/") if raised else None  # it goes into a markdown table


def run_all(args: argparse.Namespace, names: list[str], raw_dir: Path) -> None:
    """Every launch in turn; what failed, and why, goes to failures.jsonl. Launches left once --deadline has passed are
    not started (their rows say so)."""
    started = time.perf_counter()
    for launch in plan_launches(names, args.gpus):
        launch = dataclasses.replace(launch, variants=tuple(
            name for name in launch.variants if torch.cuda.is_available() or VARIANTS[name].runs_on_cpu))
        if not launch.variants:
            continue
        if time.perf_counter() - started > args.deadline:
            record_failure(raw_dir, launch, f"not run: the run's {args.deadline:.0f} s deadline had passed",
                           started=False)
            continue
        print(f"running {', '.join(launch.variants)} on {launch.gpus} rank(s) ...", flush=True)
        reason = run_launch(launch, args, raw_dir)
        if reason and VARIANTS[launch.variants[0]].eager_if_capture_fails:
            record_failure(raw_dir, launch, reason)
            print(f"  failed with its step captured ({reason}); measuring it eager", flush=True)
            launch = dataclasses.replace(launch, eager=True)
            reason = run_launch(launch, args, raw_dir)
        if reason:
            record_failure(raw_dir, launch, reason)
            print(f"  failed: {reason}", flush=True)


def record_failure(raw_dir: Path, launch: Launch, reason: str, started: bool = True) -> None:
    with (raw_dir / "failures.jsonl").open("a") as handle:
        for name in launch.variants:
            mode = "eager" if launch.eager else VARIANTS[name].mode
            handle.write(json.dumps({"variant": name, "mode": mode, "reason": reason, "started": started}) + "\n")


# --- the tables ------------------------------------------------------------------------------------------------------


def read_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def absent_cell(variant: Variant, failures: dict[str, dict], cuda: bool) -> str:
    """What a row without a measurement says: what the variant needs (CPU smoke runs), or why its launch failed."""
    if not cuda and not variant.runs_on_cpu:
        return f"needs {variant.needs}"
    failure = failures.get(variant.name)
    if failure is None:
        return "not run"
    return f"failed ({failure['mode']}): {failure['reason']}" if failure["started"] else failure["reason"]


def analyse(results: list[dict], failures: list[dict], names: list[str], widths: list[int],
            cuda: bool) -> tuple[list[str], list[list[object]]]:
    """One row per variant and width: rate (the median window's) and the windows' spread around it (max - min over
    the median), scaling efficiency against its 1-GPU reference (same layers, step mode
    and AdamW), difference from the hand-written path on as many GPUs, peak memory, set-up time, mean loss, whether
    the ranks' parameters agree, and what wrapped the model and updated it."""
    by_key = {(r["trainer"], r["width"]): r for r in results}
    failed = {failure["variant"]: failure for failure in failures}
    headers = ["variant", "what", "width", "GPUs", "step", "samples/s", "window spread", "scaling eff.",
               "vs hand-written", "peak GiB/GPU", "set-up s", "mean loss", "ranks agree", "wrapper / optimizer"]
    rows = []
    for width in widths:
        hand_written_rate = by_key.get(("hand-written", width), {}).get("samples_per_second")
        for name in names:
            variant, r = VARIANTS[name], by_key.get((name, width))
            if r is None:
                rows.append([name, variant.what, width, variant.gpus, variant.mode, absent_cell(variant, failed, cuda),
                             *["-"] * 8])
                continue
            rate = r["samples_per_second"]
            efficiency = "reference" if variant.gpus == 1 else "-"
            if variant.gpus > 1:
                single = reference(variant, r, results)
                if single:
                    efficiency = f"{rate / (r['world_size'] * single['samples_per_second']):.1%}"
            versus = (f"{rate / hand_written_rate - 1:+.1%}"
                      if hand_written_rate and variant.gpus > 1 and name != "hand-written" else "-")
            agree = {True: "yes", False: "NO", None: "-"}[r["ranks_agree"]]
            windows = r["window_samples_per_second"]
            spread = f"{(max(windows) - min(windows)) / rate:.1%}"
            rows.append([name, variant.what, width, r["world_size"], r["mode"], f"{rate:,.0f}", spread, efficiency,
                         versus,
                         f"{r['peak_memory_gib']:.2f}", f"{r['setup_seconds']:.1f}", f"{r['mean_loss']:.4f}", agree,
                         f"{r['wrapper']} / {r['optimizer']}"])
    return headers, rows


def decisions(results: list[dict], widths: list[int], margin: float) -> tuple[list[str], list[list[object]]]:
    """For each piece of hand-written code: its gain over the best library variant it replaces, at each width, and
    what the margin rule suggests (keep it only where it wins by `margin` at some width and loses by less than
    `margin` at none). The decision itself is left for a person to write."""
    rates = {(r["trainer"], r["width"]): r["samples_per_second"] for r in results}
    headers = ["hand-written code", *[f"width {width}" for width in widths], f"rule ({margin:.0%} margin)",
               "decision"]
    rows = []
    for question, ours, theirs in DECISIONS:
        gains, cells = [], []
        for width in widths:
            measured = [(rates[(name, width)], name) for name in theirs if (name, width) in rates]
            if (ours, width) not in rates or not measured:
                cells.append("-")
                continue
            best_rate, best = max(measured)
            gains.append(rates[(ours, width)] / best_rate - 1)
            cells.append(f"{gains[-1]:+.1%} ({ours} vs {best})")
        if len(gains) < len(widths):
            suggestion = "-"
        else:
            suggestion = "keep" if max(gains) >= margin and min(gains) > -margin else "replace"
        rows.append([question, *cells, suggestion, "_(lead)_"])
    return headers, rows


def notes(results: list[dict], failures: list[dict]) -> list[str]:
    """What a reader must know to read the rows: capture failures behind an eager row."""
    measured = {(r["trainer"], r["mode"]) for r in results}
    lines = []
    for failure in failures:
        if failure["mode"] == "graph" and (failure["variant"], "eager") in measured:
            lines.append(f"`{failure['variant']}` could not run as a CUDA graph ({failure['reason']}): measured eager.")
    return lines


def render(args: argparse.Namespace, names: list[str], raw_dir: Path) -> None:
    run = json.loads((raw_dir / "run.json").read_text())
    results, failures = read_lines(raw_dir / "results.jsonl"), read_lines(raw_dir / "failures.jsonl")
    headers, rows = analyse(results, failures, names, args.widths, run["cuda"])
    table = markdown_table(headers, rows)
    decision_headers, decision_rows = decisions(results, args.widths, args.keep_margin)
    decision_table = markdown_table(decision_headers, decision_rows)
    print(table, decision_table, sep="\n\n")
    body = "\n".join([
        provenance(run["machine"], run["command"], run["measured"]),
        model_line([PLAIN_MLP]),
        f"- Data: {args.features} input features, batch {args.batch_size} per GPU "
        f"({DOCS_PER_QUERY} documents a query), synthetic queries, listwise loss, AdamW with the run's warm-up and "
        f"cosine schedule, the same initial weights in every variant; median of {args.windows} windows of "
        f"{args.steps_per_window} steps after {args.warmup_steps} warm-up steps",
        "- Every variant runs the project's step and loop (benchmarks.gpu.native_harness.NativeHarness) under the "
        "project's process-group set-up (sagemaker_distributed.process_group); only the data parallelism differs. `step`: `graph` replays the whole step as one CUDA "
        "graph (ranker.gpu.captured_step), `eager` launches it from Python, `compiled` runs the model through "
        "torch.compile. Scaling efficiency is against the 1-GPU row with the same layers, step and AdamW",
        "- `ddp-zero-overlap` runs eager with foreach AdamW: the functional AdamW that `overlap_with_ddp` requires "
        "keeps its step counts on the host (no fused kernel for them; a replay would freeze the bias correction) and "
        "its learning rate fixed (the schedule does not reach it)",
        "- `ranks agree`: every rank's parameters bit-identical after the run (a replicated variant whose replayed "
        "step skipped its reduction would drift apart); `-` where the parameters are sharded (FSDP2)",
        *[f"- {line}" for line in notes(results, failures)],
        "",
        table,
        "",
        f"Margin rule: the hand-written code stays only where it is at least {args.keep_margin:.0%} faster than the "
        f"best library variant that replaces it at one width and no more than {args.keep_margin:.0%} slower at the "
        "other: all figures come from this one run (the windows' spread is in the table), and two device calls "
        "measure the same trainer up to ~3% apart (the optimisation log).",
        "",
        decision_table,
        "",
        "Decision: _(lead, from the rows above: which of ranker/gpu/fused_data_parallel.py and "
        "ranker/gpu/sharded_optimizer.py stay, and which library path replaces the others)_",
    ])
    write_section(SECTION, "Data parallelism: PyTorch's own against the hand-written reduction", body, doc=args.doc)
    print(f"raw results: {raw_dir}; written to {args.doc}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help=f"comma-separated, from: {', '.join(VARIANTS)}")
    parser.add_argument("--widths", default="1024,4096")
    parser.add_argument("--features", type=int, default=136)
    parser.add_argument("--batch-size", type=int, default=8192, help="documents per GPU per step")
    parser.add_argument("--warmup-steps", type=int, default=20, help="covers DDP's 11 eager steps before capture")
    parser.add_argument("--steps-per-window", type=int, default=20)
    parser.add_argument("--windows", type=int, default=7)
    parser.add_argument("--gpus", type=int, default=2, help="GPUs (gloo ranks on CPU) of the data-parallel variants")
    parser.add_argument("--keep-margin", type=float, default=0.03,
                        help="the decision rule's margin, as a fraction (0.03: 3%%)")
    parser.add_argument("--launch-timeout", type=float, default=120.0,
                        help="seconds one torchrun launch may take (compiling included) before it counts as failed")
    parser.add_argument("--deadline", type=float, default=330.0,
                        help="seconds after which launches not yet started are skipped")
    parser.add_argument("--raw-dir", type=Path, default=None, help="where logs and raw JSON lines go")
    parser.add_argument("--doc", type=Path, default=BENCHMARKS_DOC)
    parser.add_argument("--render-only", action="store_true", help="run nothing: render --raw-dir's results")
    parser.add_argument("--run-variants", default=None, help=argparse.SUPPRESS)  # a torchrun worker's own variants
    parser.add_argument("--eager", action="store_true", help=argparse.SUPPRESS)  # the worker's step runs eager
    parser.add_argument("--results", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.widths = [int(width) for width in args.widths.split(",")]
    unknown = [name for name in args.variants.split(",") if name not in VARIANTS]
    if unknown:
        parser.error(f"--variants: {', '.join(unknown)} unknown; choose from {', '.join(VARIANTS)}")
    if args.batch_size % DOCS_PER_QUERY:
        parser.error(f"--batch-size: {args.batch_size} is not a multiple of {DOCS_PER_QUERY} documents per query")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.run_variants:
        run_worker(args)
        return
    # The references first, each variant in the order VARIANTS lists it.
    names = sorted(args.variants.split(","), key=lambda name: (VARIANTS[name].gpus, list(VARIANTS).index(name)))
    raw_dir = args.raw_dir or Path(tempfile.mkdtemp(prefix="data-parallel-library-"))
    raw_dir.mkdir(parents=True, exist_ok=True)
    if not args.render_only:
        for stale in ("results.jsonl", "failures.jsonl"):
            (raw_dir / stale).unlink(missing_ok=True)
        cuda = torch.cuda.is_available()
        machine = gpu_machine_description() if cuda else f"CPU only (smoke run, gloo); torch {torch.__version__}"
        (raw_dir / "run.json").write_text(json.dumps({"machine": machine, "command": command_line(),
                                                      "measured": measured_at(), "cuda": cuda}))
        run_all(args, names, raw_dir)
    render(args, names, raw_dir)


if __name__ == "__main__":
    main()
