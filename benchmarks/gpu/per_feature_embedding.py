"""What the shipped model's per-feature embedding costs per document, run each way the code can run it.

    python -m benchmarks.gpu.per_feature_embedding                      # a GPU: training passes and the forward alone
    python -m benchmarks.gpu.per_feature_embedding --device cpu         # a CPU: the forward (evaluation, scoring)

The shipped model's encoding and embedding (benchmarks.harness.models, 136 features) on a batch of documents drawn like
the search-like benchmark's, fitted as a run fits them:
- `modules`: ranker.model.embedding as it ships: features first, one batched product per layer (bf16 autocast on GPU);
- `documents-first einsum`: the same layers as an einsum per layer over the documents-first layout, the formulation the
  modules replaced, as the baseline measured in the same run;
- `fused, N documents a program`: ranker.gpu.fused_embedding's Triton kernels (GPU only), for a few tile sizes.
On a GPU each variant's passes are captured as one CUDA graph and replayed (as the training step runs them); times are
the median of `--repeats` timed rounds. Table on stdout; section `per-feature-embedding-<device>` in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch

from benchmarks.harness.models import SHIPPED_MODEL, SHIPPED_WIDTH, benchmark_model, model_line
from benchmarks.harness.report import BENCHMARKS_DOC, markdown_table, provenance, write_section
from ranker.data import synthetic_search
from ranker.gpu import fused_embedding
from ranker.model.embedding import PerFeatureDense
from ranker.model.mlp import RankingMLP
from ranker.training import engine


def einsum_embedding(model: RankingMLP, features: torch.Tensor) -> torch.Tensor:
    """The former formulation: each layer an einsum over `[documents, features, inputs]`, bias and ReLU after it."""
    per_feature = model.encoding(features).unflatten(-1, (model.embedding.num_features, -1))
    for layer in (module for module in model.embedding.layers if isinstance(module, PerFeatureDense)):
        per_feature = torch.relu(torch.einsum("...fi,fiw->...fw", per_feature, layer.weight) + layer.bias)
    return per_feature.flatten(-2)


def variants(model: RankingMLP, device: torch.device) -> dict[str, Callable[[torch.Tensor], torch.Tensor]]:
    found = {"modules": model.inputs, "documents-first einsum": lambda x: einsum_embedding(model, x)}
    if device.type == "cuda":
        for block in sorted({32, fused_embedding.BLOCK_DOCUMENTS, 128}):
            shipped = " (shipped)" if block == fused_embedding.BLOCK_DOCUMENTS else ""
            found[f"fused, {block} documents a program{shipped}"] = fused_at(model, block)
    return found


def fused_at(model: RankingMLP, block: int) -> Callable[[torch.Tensor], torch.Tensor]:
    def run(features: torch.Tensor) -> torch.Tensor:
        return fused_embedding.fused_feature_embedding(features, model.encoding, model.embedding,
                                                       block_documents=block)
    return run


def seconds_per_round(passes: Callable[[], None], device: torch.device, repeats: int, rounds_per_timing: int) -> float:
    """Median seconds of one call of `passes`: on a GPU captured once as a CUDA graph and replayed."""
    if device.type == "cuda":
        for _ in range(3):  # allocator and kernel compilation before capture
            passes()
        torch.cuda.synchronize(device)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            passes()
        passes = graph.replay
    timings = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        started = time.perf_counter()
        for _ in range(rounds_per_timing):
            passes()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        timings.append((time.perf_counter() - started) / rounds_per_timing)
    return statistics.median(timings)


def measure(model: RankingMLP, features: torch.Tensor, embed: Callable, training: bool, device: torch.device,
            repeats: int) -> float:
    parameters = list(model.embedding.parameters())

    def passes() -> None:
        with engine.autocast(device):
            output = embed(features)
        if training:
            grads = torch.autograd.grad(output, parameters, torch.ones_like(output))
            del grads

    with torch.set_grad_enabled(training):
        return seconds_per_round(passes, device, repeats, rounds_per_timing=20 if device.type == "cuda" else 1)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--documents", type=int, default=None,
                        help="documents per batch (default: 8,192 on a GPU, a training step's; 48,000 on a CPU, about "
                             "a validation pass of 400 queries)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--doc", type=Path, default=BENCHMARKS_DOC)
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    documents = args.documents or (8192 if device.type == "cuda" else 48_000)
    data = synthetic_search.generate(max(2, documents // 100), docs_per_query=120, num_features=136, seed=0)
    model = RankingMLP(benchmark_model(SHIPPED_MODEL, SHIPPED_WIDTH, data.num_features)).to(device)
    engine.fit_encoding(model, data.features, seed=0)
    rows_needed = torch.arange(documents) % len(data.features)
    features = torch.from_numpy(data.features)[rows_needed].to(device)
    passes = ("training (forward and backward)", "forward") if device.type == "cuda" else ("forward",)
    rows, reference = [], {}
    for label, embed in variants(model, device).items():
        for kind in passes:
            seconds = measure(model, features, embed, kind.startswith("training"), device, args.repeats)
            reference.setdefault(kind, seconds if label == "modules" else None)
            base = reference[kind]
            rows.append([label, kind, f"{seconds * 1e9 / documents:,.1f}", f"{documents / seconds:,.0f}",
                         f"{base / seconds:.2f}x" if base else "-"])
            print(f"{label}, {kind}: {seconds * 1e3:.3f} ms per batch of {documents:,}", flush=True)
    table = markdown_table(["variant", "passes", "ns per document", "documents/s", "vs modules"], rows)
    machine = (f"{torch.cuda.get_device_name(0)}; torch {torch.__version__}" if device.type == "cuda"
               else f"CPU, {torch.get_num_threads()} threads; torch {torch.__version__}")
    body = (f"{provenance(machine)}\n{model_line([SHIPPED_MODEL])}\n- Batch: {documents:,} documents of "
            f"ranker.data.synthetic_search, the encoding fitted on them; "
            f"{'bf16 autocast, each variant captured as a CUDA graph' if device.type == 'cuda' else 'float32'}, "
            f"median of {args.repeats}\n\n{table}\n")
    print(table)
    write_section(f"per-feature-embedding-{device.type}", f"The per-feature embedding's cost per document "
                  f"({'GPU' if device.type == 'cuda' else 'CPU'})", body, doc=args.doc)


if __name__ == "__main__":
    main()
