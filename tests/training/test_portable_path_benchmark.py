"""The GPU benchmark of the path a torch 2.2 container takes (benchmarks.gpu.gpu_portable_path), run on CPU at a toy
size: its MSLR-WEB30K-shaped data, its three variants on their paths, and the section it writes."""

from __future__ import annotations

import os

import numpy as np
from ranker.gpu.fast_paths import FORCE_VARIABLE

from benchmarks.gpu import gpu_portable_path
from benchmarks.gpu.gpu_portable_path import MSLR_MAX_DOCS, MSLR_MEAN_DOCS, mslr_shaped


def test_the_data_has_mslr_web30k_s_shape():
    data = mslr_shaped(2000, MSLR_MAX_DOCS)
    counts = np.diff(data.query_offsets)
    assert data.num_features == 136 and data.max_docs == MSLR_MAX_DOCS and counts.min() >= 1
    assert abs(counts.mean() - MSLR_MEAN_DOCS) < 0.1 * MSLR_MEAN_DOCS
    assert len(data.labels) == counts.sum() == len(data.features)


def test_a_toy_run_measures_the_three_paths_and_writes_its_section(tmp_path, capsys):
    doc = tmp_path / "benchmarks.md"
    gpu_portable_path.main(["--queries", "48", "--max-docs", "6", "--warmup-steps", "1", "--steps-per-window", "1",
                            "--windows", "1", "--repeats", "1", "--doc", str(doc)])
    section = doc.read_text()
    rows = {line.split(" | ")[0].lstrip("| "): line for line in section.splitlines() if line.startswith("| ")}
    # the fast path on this torch's own capabilities; the other two as torch 2.2, each naming why
    assert "on torch " in rows["fast path"] and FORCE_VARIABLE not in rows["fast path"]
    for name in ("as torch 2.2", "plain eager"):
        assert f"({FORCE_VARIABLE}=2.2)" in rows[name] and "torch.mm(out_dtype=)" not in rows["fast path"]
    assert "<!-- gpu-portable-path:start -->" in section and "of the fast path's step rate (target 70%" in section
    assert FORCE_VARIABLE not in os.environ  # the emulation ends with its run
