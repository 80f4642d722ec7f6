"""train_lightning.py's step rate beside the native trainer's on the same GPUs, and where the difference per step goes.

    python -m benchmarks.gpu.lightning_vs_native                   # on a GPU machine: every GPU, widths 1024 and 4096
    python -m benchmarks.gpu.lightning_vs_native --with-compile    # also Lightning with torch.compile of the module
    python -m benchmarks.gpu.lightning_vs_native --processes 2 --widths 16 --features 8 --batch-size 64  # CPU smoke run

Each variant runs under torchrun on all GPUs (gloo ranks on a CPU-only machine) through benchmarks.gpu.project_trainers,
which times itself over windows after a warm-up (benchmarks/harness/timing.py):
- native: train_ddp.py's step (one CUDA graph per step, FusedDataParallel, the sharded AdamW update);
- native, eager: the same step run eagerly: the per-step work Lightning runs (its strategy takes FusedDataParallel and
  the sharded update where the native trainer does, ranker.lightning.strategy), without Lightning's loop;
- native, DDP, eager: the native loop with PyTorch's DDP and an eager step: what plain DDP would cost;
- lightning: train_lightning.py's Trainer and RankingModule (automatic optimization, bf16-mixed, its
  FusedDataParallelStrategy, fused AdamW), with its metric-line callback;
- lightning, compiled (`--with-compile`): the same with torch.compile of the module (DDP then: Inductor's kernels
  instead of the fused layers).
The per-step difference from native splits into what the native step's CUDA graph saves over the same step run
eagerly, and what Lightning's loop adds to that eager step. Results: a table on stdout and a section in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

from benchmarks.gpu.gpu_scaling import Layout, run_layout
from benchmarks.harness.machine import gpu_machine_description
from benchmarks.harness.models import PLAIN_MLP, model_line
from benchmarks.harness.report import BENCHMARKS_DOC, markdown_table, provenance, write_section

SECTION = "lightning-vs-native"


@dataclass(frozen=True)
class Variant:
    label: str
    trainer: str
    """A trainer of benchmarks.gpu.project_trainers."""
    flags: tuple[str, ...] = ()


NATIVE = Variant("native", "native")
NATIVE_EAGER = Variant("native, eager", "native", ("--eager",))
NATIVE_EAGER_DDP = Variant("native, DDP, eager", "native-ddp", ("--eager",))
LIGHTNING = Variant("lightning", "lightning")
LIGHTNING_COMPILED = Variant("lightning, compiled", "lightning", ("--compile",))


def run_variant(variant: Variant, layout: Layout, args: argparse.Namespace, raw_dir: Path) -> list[dict]:
    folder = raw_dir / variant.label.replace(", ", "-").replace(" ", "-")
    folder.mkdir(parents=True, exist_ok=True)
    results = folder / "results.jsonl"
    results.unlink(missing_ok=True)
    print(f"running {variant.label} on {layout.label} ...", flush=True)
    run_layout(layout, variant.trainer, [
        *variant.flags, "--widths", args.widths, "--features", str(args.features), "--batch-size",
        str(args.batch_size), "--warmup-steps", str(args.warmup_steps), "--steps-per-window",
        str(args.steps_per_window), "--windows", str(args.windows), "--results", str(results)], folder)
    return [{**json.loads(line), "variant": variant.label} for line in results.read_text().splitlines()]


def milliseconds_per_step(result: dict) -> float:
    samples_per_step = result["batch_per_rank"] * result["world_size"]
    return 1000 * samples_per_step / result["samples_per_second"]


def analyse(results: list[dict]) -> tuple[list[str], list[list[object]], list[str]]:
    """One row per (width, variant): rate, time per step, and the difference from native; and per width, the line
    splitting Lightning's extra time per step into the native step's savings and Lightning's loop."""
    by_key = {(r["width"], r["variant"]): r for r in results}
    headers = ["width", "trainer", "samples/s", "ms/step", "vs native", "ms/step vs native"]
    rows, findings = [], []
    for width in sorted({r["width"] for r in results}):
        native = by_key.get((width, NATIVE.label))
        for r in (r for r in results if r["width"] == width):
            step = milliseconds_per_step(r)
            rows.append([width, r["variant"], f"{r['samples_per_second']:,.0f}", f"{step:.3f}",
                         f"{r['samples_per_second'] / native['samples_per_second'] - 1:+.1%}"
                         if native and r is not native else "-",
                         f"{step - milliseconds_per_step(native):+.3f}" if native and r is not native else "-"])
        eager, lightning = by_key.get((width, NATIVE_EAGER.label)), by_key.get((width, LIGHTNING.label))
        if native and eager and lightning:
            native_ms, eager_ms, lightning_ms = (milliseconds_per_step(r) for r in (native, eager, lightning))
            findings.append(
                f"width {width}: Lightning takes {lightning_ms - native_ms:+.3f} ms per step against native; "
                f"{eager_ms - native_ms:+.3f} ms of it is the native step run eagerly instead of as a CUDA graph, "
                f"{lightning_ms - eager_ms:+.3f} ms is Lightning's loop around the same eager work")
    return headers, rows, findings


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    gpus = torch.cuda.device_count()
    parser.add_argument("--widths", default="1024,4096")
    parser.add_argument("--features", type=int, default=136)
    parser.add_argument("--batch-size", type=int, default=8192, help="samples per GPU and step")
    parser.add_argument("--warmup-steps", type=int, default=15)
    parser.add_argument("--steps-per-window", type=int, default=20)
    parser.add_argument("--windows", type=int, default=5)
    parser.add_argument("--processes", type=int, default=2, help="CPU smoke runs only: gloo ranks")
    parser.add_argument("--with-compile", action="store_true", help="also time Lightning with torch.compile")
    parser.add_argument("--raw-dir", type=Path, default=None, help="where logs and raw JSON lines go")
    parser.add_argument("--doc", type=Path, default=BENCHMARKS_DOC)
    args = parser.parse_args(argv)

    layout = Layout(gpus or args.processes, 1)
    raw_dir = args.raw_dir or Path(tempfile.mkdtemp(prefix="lightning-vs-native-"))
    variants = [NATIVE, NATIVE_EAGER, NATIVE_EAGER_DDP, LIGHTNING] + ([LIGHTNING_COMPILED] if args.with_compile else [])
    results = [result for variant in variants for result in run_variant(variant, layout, args, raw_dir)]
    headers, rows, findings = analyse(results)
    table = markdown_table(headers, rows)
    print(table)
    print("\n".join(findings))
    body = (f"{provenance(gpu_machine_description())}\n{model_line([PLAIN_MLP])}\n- Layout: {layout.label}; {args.features} "
            f"input features, batch {args.batch_size} samples per GPU ({args.batch_size // 32} queries of 32 documents), "
            f"synthetic data; median of {args.windows} windows of {args.steps_per_window} steps after "
            f"{args.warmup_steps} warm-up steps\n" + "".join(f"- {line}\n" for line in findings) + f"\n{table}\n")
    write_section(SECTION, "Lightning beside the native trainer", body, doc=args.doc)
    (raw_dir / "results.jsonl").write_text("".join(json.dumps(result) + "\n" for result in results))
    print(f"raw results: {raw_dir}; written to {args.doc}")


if __name__ == "__main__":
    main()
