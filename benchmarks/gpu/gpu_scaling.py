"""GPU throughput and scaling of the project's trainers against naive baselines, in one invocation.

    python -m benchmarks.gpu.gpu_scaling                       # on a GPU machine: every trainer, layout and width
    python -m benchmarks.gpu.gpu_scaling --gpu-counts 1,2,4,8 --emulated-hosts 8

Two comparisons (the models are benchmarks.harness.models'):
- the peers: each trainer (native, lightning, naive-ddp, naive-lightning) trains the plain MLP, the model the naive
  baselines train, at each of `--widths`;
- the shipped model: the project's trainers train the shipped model (encoding, per-feature embeddings, norm, dropout)
  and the plain MLP at the shipped width (`--shipped-width`), so its row says what the model costs beside the plain
  MLP of the same width.
For each trainer and layout (1 GPU, every GPU count asked for, and N emulated hosts: N torchrun agents with --nnodes N
on this one machine, one GPU each) it launches the trainer under torchrun, which measures itself over timed windows
after a warm-up (benchmarks/harness/timing.py). The bf16 matmul rate measured in the same run is the denominator of
model-FLOPs utilisation (the FLOPs each model's layers and embeddings do, benchmarks.harness.models).
Results: a table on stdout, a section in docs/benchmarks.md, a scaling plot beside it, raw JSON lines.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

from benchmarks.harness.machine import SAFE_NCCL_ENV, gpu_machine_description
from benchmarks.harness.models import PLAIN_MLP, SHIPPED_MODEL, SHIPPED_WIDTH, model_line
from benchmarks.gpu.project_variants import PROJECT_TRAINERS, REDUCTION_ABLATIONS
from benchmarks.harness.report import (BENCHMARKS_DOC, command_line, markdown_table, measured_at, provenance,
                                       write_section)

TRAINER_MODULES = {**dict.fromkeys(PROJECT_TRAINERS, "benchmarks.gpu.project_trainers"),
                   "naive-ddp": "benchmarks.baselines.naive_ddp",
                   "naive-lightning": "benchmarks.baselines.naive_lightning"}
# Trainers measured against another's 1-GPU figure: how gradients are reduced only matters with several GPUs.
MULTI_GPU_ONLY = dict.fromkeys(REDUCTION_ABLATIONS, "native")
NAIVE_TRAINERS = ("naive-ddp", "naive-lightning")


@dataclass(frozen=True)
class Layout:
    gpus: int
    hosts: int

    @property
    def label(self) -> str:
        gpus = f"{self.gpus} GPU" + ("s" if self.gpus > 1 else "")
        return gpus + (f" as {self.hosts} hosts" if self.hosts > 1 else "")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def launch_commands(layout: Layout, trainer: str,
                    trainer_args: list[str]) -> Iterator[tuple[list[str], dict[str, str]]]:
    """torchrun command lines (one per emulated host) and the extra environment of each."""
    module = TRAINER_MODULES[trainer]
    extra = ["--trainer", trainer] if module == "benchmarks.gpu.project_trainers" else []
    tail = ["-m", module, *extra, *trainer_args]
    if layout.hosts == 1:
        devices = ",".join(str(index) for index in range(layout.gpus))
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={layout.gpus}"]
        yield [*command, *tail], {"CUDA_VISIBLE_DEVICES": devices}
        return
    port = free_port()
    per_host = layout.gpus // layout.hosts
    ordinals = [str(index) for index in range(layout.gpus)]
    for node_rank in range(layout.hosts):
        # Each agent sees every GPU, its host's own first (LOCAL_RANK picks among those), as a process on a real
        # multi-GPU host sees all of that host's GPUs. Hiding the others instead (CUDA_VISIBLE_DEVICES=<own>) makes a
        # layout no real cluster has, a peer reachable over NVLink that CUDA cannot see: NCCL's peer copies then run
        # as plain device copies and slow the kernels beside them, 3% of throughput (docs/benchmarks.md).
        devices = ",".join(ordinals[node_rank * per_host:] + ordinals[:node_rank * per_host])
        yield [
            sys.executable, "-m", "torch.distributed.run", f"--nnodes={layout.hosts}", f"--node_rank={node_rank}",
            f"--nproc_per_node={per_host}", "--master_addr=127.0.0.1", f"--master_port={port}", *tail,
        ], {"CUDA_VISIBLE_DEVICES": devices}


def run_layout(layout: Layout, trainer: str, trainer_args: list[str], log_dir: Path, label: str | None = None) -> None:
    processes = []
    for node_rank, (command, extra_env) in enumerate(launch_commands(layout, trainer, trainer_args)):
        log = (log_dir / f"{label or trainer}-{layout.gpus}gpu-{layout.hosts}host-{node_rank}.log").open("w")
        env = {**os.environ, **SAFE_NCCL_ENV, **extra_env}
        if not torch.cuda.is_available():
            env.pop("CUDA_VISIBLE_DEVICES")
        processes.append((subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT), log))
    failed = []
    for process, log in processes:
        if process.wait() != 0:
            failed.append(log.name)
        log.close()
    if failed:
        tail = Path(failed[0]).read_text()[-3000:]
        raise RuntimeError(f"{trainer} on {layout.label} failed; log {failed[0]}:\n{tail}")


def measure_bf16_matmul_tflops(size: int = 8192, repeats: int = 20) -> float:
    """Median rate of a size^3 bf16 matrix product on random data: the MFU denominator."""
    a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    for _ in range(5):
        a @ b
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        a @ b
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1000)
    del a, b
    torch.cuda.empty_cache()
    return 2 * size**3 / sorted(times)[len(times) // 2] / 1e12


def analyse(results: list[dict], matmul_tflops: float | None) -> tuple[list[str], list[list[object]]]:
    """One row per (model, trainer, width, layout): rate, speed-up over naive DDP (same model, width and layout),
    scaling efficiency against the same trainer on 1 GPU, MFU, difference from the native trainer, the shipped model's
    rate against the plain MLP's (same trainer, width and layout), peak memory."""
    by_key = {(r["model"], r["trainer"], r["width"], r["world_size"], r["nodes"]): r for r in results}
    headers = ["model", "trainer", "width", "layout", "samples/s", "x naive DDP", "scaling eff.", "MFU", "vs native",
               "vs plain MLP", "peak GiB/GPU"]
    rows = []

    def order(r: dict) -> tuple:
        return (r["width"], r["model"] != PLAIN_MLP, list(TRAINER_MODULES).index(r["trainer"]), r["world_size"],
                r["nodes"])

    def ratio(r: dict, other: dict | None) -> str:
        return f"{r['samples_per_second'] / other['samples_per_second'] - 1:+.1%}" if other else "-"

    for r in sorted(results, key=order):
        layout_key = (r["width"], r["world_size"], r["nodes"])
        single = by_key.get((r["model"], MULTI_GPU_ONLY.get(r["trainer"], r["trainer"]), r["width"], 1, 1))
        naive = by_key.get((r["model"], "naive-ddp", *layout_key))
        native = by_key.get((r["model"], "native", *layout_key))
        plain = by_key.get((PLAIN_MLP, r["trainer"], *layout_key)) if r["model"] != PLAIN_MLP else None
        single_rate = single["samples_per_second"] if single else None
        efficiency = r["samples_per_second"] / (r["world_size"] * single_rate) if single_rate else None
        mfu = (r["samples_per_second"] * r["flops_per_sample"] / r["world_size"] / (matmul_tflops * 1e12)
               if matmul_tflops else None)
        layout = Layout(r["world_size"], r["nodes"]).label
        rows.append([
            r["model"], r["trainer"], r["width"], layout, f"{r['samples_per_second']:,.0f}",
            f"{r['samples_per_second'] / naive['samples_per_second']:.1f}x" if naive else "-",
            f"{efficiency:.1%}" if efficiency else "-",
            f"{mfu:.1%}" if mfu else "-",
            ratio(r, native) if r["trainer"] != "native" else "-",
            ratio(r, plain),
            f"{r['peak_memory_gib']:.1f}",
        ])
    return headers, rows


def plot_scaling(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    widths = sorted({r["width"] for r in results})
    figure, axes = plt.subplots(1, len(widths), figsize=(6 * len(widths), 4), squeeze=False)
    for axis, width in zip(axes[0], widths):
        for model in (PLAIN_MLP, SHIPPED_MODEL):
            for trainer in TRAINER_MODULES:
                points = sorted((r["world_size"], r["samples_per_second"]) for r in results
                                if r["trainer"] == trainer and r["model"] == model and r["width"] == width
                                and r["nodes"] == 1)
                if points:
                    axis.plot(*zip(*points), marker="o", label=f"{trainer}, {model}")
        counts = sorted({r["world_size"] for r in results})
        axis.set(title=f"width {width}", xlabel="GPUs", ylabel="samples/s", xscale="log", yscale="log")
        axis.set_xticks(counts, [str(count) for count in counts])
        axis.minorticks_off()
        axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    gpus = torch.cuda.device_count()
    parser.add_argument("--gpu-counts", default=None, help="comma-separated GPU counts (default: 1 and all)")
    parser.add_argument("--emulated-hosts", type=int, default=gpus if gpus > 1 else 0,
                        help="also run this many torchrun agents (--nnodes) of one GPU each; 0 = skip")
    parser.add_argument("--trainers", default=",".join(t for t in TRAINER_MODULES if t not in MULTI_GPU_ONLY),
                        help=f"comma-separated; {', '.join(MULTI_GPU_ONLY)} (ablations of the gradient reduction, "
                             "several GPUs only) are opt-in")
    parser.add_argument("--widths", default="1024,4096", help="widths of the plain MLP every trainer trains")
    parser.add_argument("--shipped-width", type=int, default=SHIPPED_WIDTH,
                        help="width at which the project's trainers train the shipped model and the plain MLP; 0: skip")
    parser.add_argument("--batch-size", type=int, default=8192)
    parser.add_argument("--warmup-steps", type=int, default=15)
    parser.add_argument("--steps-per-window", type=int, default=20)
    parser.add_argument("--windows", type=int, default=5)
    parser.add_argument("--naive-steps-per-window", type=int, default=8,
                        help="the naive baselines run 10-100x slower: fewer steps time them as steadily")
    parser.add_argument("--processes", type=int, default=2, help="CPU smoke runs only: ranks for the multi layout")
    parser.add_argument("--raw-dir", type=Path, default=None, help="where logs and raw JSON lines go")
    parser.add_argument("--doc", type=Path, default=BENCHMARKS_DOC)
    parser.add_argument("--section", default="gpu-scaling",
                        help="docs/benchmarks.md section to write; its plot is benchmarks-SECTION.png beside the doc")
    parser.add_argument("--title", default="GPU throughput and scaling", help="the section's title")
    parser.add_argument("--note", default="",
                        help="a line of provenance to add to the doc section (with --render-only)")
    parser.add_argument("--render-only", action="store_true",
                        help="run nothing: render the table, plot and doc section from --raw-dir's results")
    args = parser.parse_args(argv)

    default_counts = sorted({1, gpus or args.processes})
    counts = [int(c) for c in args.gpu_counts.split(",")] if args.gpu_counts else default_counts
    layouts = [Layout(count, 1) for count in counts]
    if args.emulated_hosts > 1:
        layouts.append(Layout(args.emulated_hosts, args.emulated_hosts))
    raw_dir = args.raw_dir or Path(tempfile.mkdtemp(prefix="gpu-scaling-"))
    raw_dir.mkdir(parents=True, exist_ok=True)
    results_path, run_path = raw_dir / "results.jsonl", raw_dir / "run.json"
    if not args.render_only:
        results_path.unlink(missing_ok=True)
        # Written first, so a run cut short can still be rendered later with --render-only.
        run_path.write_text(json.dumps({"machine": gpu_machine_description(), "command": command_line(),
                                        "measured": measured_at(),
                                        "matmul_tflops": measure_bf16_matmul_tflops() if gpus else None}))
        run_layouts(args, layouts, results_path, raw_dir)
    run = json.loads(run_path.read_text())
    render(args, results_path, run)


def model_runs(trainers: list[str], widths: str, shipped_width: int) -> list[tuple[str, str, str]]:
    """(trainer, model, widths) for each trainer process to launch: every trainer on the plain MLP at `widths`, the
    project's trainers also on the shipped model and the plain MLP at `shipped_width`."""
    runs = [(trainer, PLAIN_MLP, widths) for trainer in trainers]
    if shipped_width:
        for trainer in (trainer for trainer in trainers if trainer not in NAIVE_TRAINERS):
            runs.append((trainer, SHIPPED_MODEL, str(shipped_width)))
            if str(shipped_width) not in widths.split(","):
                runs.append((trainer, PLAIN_MLP, str(shipped_width)))
    return runs


def run_layouts(args: argparse.Namespace, layouts: list[Layout], results_path: Path, raw_dir: Path) -> None:
    common = ["--batch-size", str(args.batch_size), "--windows", str(args.windows), "--results", str(results_path)]
    steps = {"project": ["--warmup-steps", str(args.warmup_steps), "--steps-per-window", str(args.steps_per_window)],
             "naive": ["--warmup-steps", "5", "--steps-per-window", str(args.naive_steps_per_window)]}
    for trainer, model, widths in model_runs(args.trainers.split(","), args.widths, args.shipped_width):
        for layout in layouts:
            if trainer in MULTI_GPU_ONLY and (layout.gpus == 1 or layout.hosts > 1):
                continue
            print(f"running {trainer} ({model}, widths {widths}) on {layout.label} ...", flush=True)
            naive = trainer in NAIVE_TRAINERS
            trainer_args = [*common, "--widths", widths, *steps["naive" if naive else "project"],
                            *([] if naive else ["--model", model])]
            run_layout(layout, trainer, trainer_args, raw_dir, label=f"{trainer}-{model.replace(' ', '-')}-{widths}")


def paths_taken(results: list[dict]) -> str:
    """Each project trainer's path (ranker.gpu.fast_paths' line, as the run logged it) per GPU count."""
    lines = {(result["trainer"], result["model"], result["world_size"], result["nodes"]): result["path"]
             for result in results if result.get("path")}
    return "Paths taken:\n" + "".join(f"- {trainer}, {model}, {world} GPU(s), {nodes} host(s): `{path}`\n"
                                      for (trainer, model, world, nodes), path in sorted(lines.items()))


def render(args: argparse.Namespace, results_path: Path, run: dict) -> None:
    matmul_tflops = run["matmul_tflops"]
    results = [json.loads(line) for line in results_path.read_text().splitlines()]
    headers, rows = analyse(results, matmul_tflops)
    table = markdown_table(headers, rows)
    print(table)
    plot_path = args.doc.with_name(f"benchmarks-{args.section}.png")
    plot_scaling(results, plot_path)
    rate = f"{matmul_tflops:.0f} TFLOP/s (8192^3 bf16 product, median of 20, same run)" if matmul_tflops else "n/a"
    body = (
        f"{provenance(run['machine'], run['command'], run.get('measured'))}\n- bf16 matmul rate: {rate}\n"
        f"{model_line(sorted({r['model'] for r in results}))}\n"
        f"- The peers: every trainer trains the plain MLP (the naive baselines' model); the shipped model's rows put it "
        f"beside the plain MLP of the same width and trainer (`vs plain MLP`)\n"
        f"- Data: 136 input features, batch {args.batch_size} documents per GPU (synthetic queries of 32), "
        f"median of {args.windows} timed windows after warm-up ({args.warmup_steps} warm-up steps and windows of "
        f"{args.steps_per_window} steps for the project's trainers; 5 and {args.naive_steps_per_window} for the "
        f"naive baselines, which run 10-100x slower)\n"
        f"- The native trainer: one CUDA-graphed step (ranker.gpu.captured_step) with fused bf16 layers and the meter's "
        f"loss and document sums; on several GPUs FusedDataParallel averages the float32 gradients "
        f"(ranker.gpu.fused_data_parallel) and, where the layers make several buckets (width 4096), each rank runs AdamW "
        f"on its shard of them beside the backward pass (ranker.gpu.sharded_optimizer; `native-replicated-update` runs "
        f"the whole update on every rank); Lightning runs train_lightning.py's Trainer and module (automatic optimization, "
        f"DDP, bf16-mixed, fused AdamW; benchmarks.gpu.lightning_vs_native splits its gap per step)\n"
        + (f"- {args.note}\n" if args.note else "") + "\n"
        f"{table}\n\n![scaling]({plot_path.name})\n\n{paths_taken(results)}"
    )
    write_section(args.section, args.title, body, doc=args.doc)
    print(f"raw results: {results_path}; written to {args.doc}")


if __name__ == "__main__":
    main()
