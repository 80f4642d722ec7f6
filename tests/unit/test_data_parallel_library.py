"""Smoke tests of benchmarks.gpu.data_parallel_library: the arithmetic behind its tables, how it plans its launches, and
a run on two gloo ranks at a tiny size, end to end."""

from __future__ import annotations

import pytest

from benchmarks.gpu import data_parallel_library as library
from benchmarks.gpu.data_parallel_library import VARIANTS, Launch, analyse, decisions, plan_launches

WIDTH = 1024


def _result(variant: str, rate: float, mode: str | None = None, width: int = WIDTH) -> dict:
    return {"trainer": variant, "width": width, "world_size": VARIANTS[variant].gpus, "samples_per_second": rate,
            "window_samples_per_second": [rate * 0.99, rate, rate * 1.02], "peak_memory_gib": 1.5,
            "mode": mode or VARIANTS[variant].mode, "setup_seconds": 3.0, "mean_loss": 2.5, "ranks_agree": True,
            "wrapper": "Wrapper", "optimizer": "AdamW"}


def _row(headers: list[str], rows: list[list[object]], variant: str, column: str) -> object:
    [row] = [row for row in rows if row[0] == variant]
    return row[headers.index(column)]


def _percent(cell: object) -> float:
    return float(str(cell).rstrip("%")) / 100


# --- the result table ------------------------------------------------------------------------------------------------


def test_scaling_efficiency_is_against_the_one_gpu_run_with_the_same_layers_step_mode_and_adamw():
    # Given 1-GPU references for graphed and eager steps, and a hook variant that ended up measured eager
    results = [_result("project-step", 1_000.0), _result("autocast-graph", 900.0), _result("autocast-eager", 400.0),
               _result("ddp", 1_700.0), _result("ddp-bf16-hook", 700.0, mode="eager"),
               _result("ddp-fused-layers", 1_900.0)]
    names = [r["trainer"] for r in results]
    # When they are analysed
    headers, rows = analyse(results, [], names, [WIDTH], cuda=True)
    # Then each 2-GPU rate is divided by twice the rate of the 1-GPU run it matches
    assert _percent(_row(headers, rows, "ddp", "scaling eff.")) == pytest.approx(1_700 / (2 * 900), abs=5e-4)
    assert _percent(_row(headers, rows, "ddp-bf16-hook", "scaling eff.")) == pytest.approx(700 / (2 * 400), abs=5e-4)
    assert _percent(_row(headers, rows, "ddp-fused-layers", "scaling eff.")) == pytest.approx(1_900 / (2 * 1_000),
                                                                                             abs=5e-4)
    assert _row(headers, rows, "autocast-eager", "scaling eff.") == "reference"


def test_vs_hand_written_compares_each_data_parallel_variant_with_the_hand_written_path_at_the_same_width():
    results = [_result("hand-written", 2_000.0), _result("ddp", 1_800.0), _result("fsdp2", 2_100.0),
               _result("hand-written", 500.0, width=4096), _result("ddp", 1.0, width=4096)]
    headers, rows = analyse(results, [], ["hand-written", "ddp", "fsdp2"], [WIDTH], cuda=True)
    assert _percent(_row(headers, rows, "ddp", "vs hand-written")) == pytest.approx(1_800 / 2_000 - 1, abs=5e-4)
    assert _percent(_row(headers, rows, "fsdp2", "vs hand-written")) == pytest.approx(2_100 / 2_000 - 1, abs=5e-4)
    assert _row(headers, rows, "hand-written", "vs hand-written") == "-"
    # and the spread of its timed windows around the median
    assert _percent(_row(headers, rows, "ddp", "window spread")) == pytest.approx(0.03, abs=5e-4)


def test_rows_without_a_measurement_say_what_the_variant_needs_on_cpu_and_why_it_failed_on_gpu():
    failures = [{"variant": "fsdp2-compiled", "mode": "compiled", "reason": "timed out after 120 s (fsdp2.log)",
                 "started": True},
                {"variant": "ddp", "mode": "graph", "reason": "not run: the run's 330 s deadline had passed",
                 "started": False}]
    names = ["hand-written", "ddp-zero-overlap", "fsdp2-compiled", "fsdp2", "ddp"]
    # On a CPU smoke run: what it needs
    headers, rows = analyse([], failures, names, [WIDTH], cuda=False)
    assert _row(headers, rows, "hand-written", "samples/s").startswith("needs CUDA and NCCL")
    assert _row(headers, rows, "ddp-zero-overlap", "samples/s").startswith("needs NCCL")
    assert _row(headers, rows, "fsdp2", "samples/s") == "not run"
    # On a GPU run: why its launch failed
    headers, rows = analyse([], failures, names, [WIDTH], cuda=True)
    assert _row(headers, rows, "fsdp2-compiled", "samples/s") == "failed (compiled): timed out after 120 s (fsdp2.log)"
    assert _row(headers, rows, "ddp", "samples/s") == "not run: the run's 330 s deadline had passed"


# --- the decision table ------------------------------------------------------------------------------------------------


def _decision(rows: list[list[object]], question_start: str) -> list[object]:
    [row] = [row for row in rows if str(row[0]).startswith(question_start)]
    return row


def test_each_piece_of_hand_written_code_is_measured_against_the_best_library_variant_that_replaces_it():
    # Given the hand-written path 5% ahead of the best library sharding at 4096 and level at 1024
    results = [_result("hand-written", 1_000.0), _result("ddp-zero-overlap", 700.0), _result("fsdp2", 1_000.0),
               _result("hand-written", 105.0, width=4096), _result("fsdp2", 100.0, width=4096),
               _result("fsdp2-compiled", 90.0, width=4096)]
    # When the decision table is built with a 3% margin
    headers, rows = decisions(results, [WIDTH, 4096], margin=0.03)
    sharding = _decision(rows, "the sharded AdamW update")
    # Then each width shows the gain over the fastest library variant measured there, named
    assert sharding[1] == "+0.0% (hand-written vs fsdp2)"
    assert sharding[2] == "+5.0% (hand-written vs fsdp2)"
    # And the rule keeps code that wins by the margin somewhere and loses it nowhere; the decision is left blank
    assert sharding[3] == "keep" and sharding[4] == "_(lead)_"
    assert headers[3] == "rule (3% margin)"


@pytest.mark.parametrize(("hand_written_rates", "suggestion"), [
    ((1_010.0, 101.0), "replace"),  # +1% at both widths: inside the margin
    ((1_050.0, 96.0), "replace"),  # +5% at one width, -4% at the other
    ((1_050.0, 98.0), "keep"),  # +5% at one width, -2% at the other
])
def test_the_margin_rule(hand_written_rates, suggestion):
    results = [_result("hand-written-replicated", hand_written_rates[0]), _result("ddp-fused-layers", 1_000.0),
               _result("hand-written-replicated", hand_written_rates[1], width=4096),
               _result("ddp-fused-layers", 100.0, width=4096)]
    _, rows = decisions(results, [WIDTH, 4096], margin=0.03)
    assert _decision(rows, "FusedDataParallel in place of DDP")[3] == suggestion


def test_the_rule_says_nothing_where_a_width_is_missing():
    _, rows = decisions([_result("hand-written", 1_000.0), _result("ddp", 500.0)], [WIDTH, 4096], margin=0.03)
    row = _decision(rows, "the hand-written path as a whole")
    assert row[1] == "+100.0% (hand-written vs ddp)" and row[2] == "-" and row[3] == "-"


# --- launches ------------------------------------------------------------------------------------------------------------


def test_the_uncompiled_references_share_a_launch_and_every_data_parallel_variant_has_its_own():
    launches = plan_launches(list(VARIANTS), gpus=2)
    assert launches[0] == Launch(("project-step", "autocast-graph", "autocast-eager", "autocast-eager-foreach"), 1)
    alone = launches[1:]
    assert all(len(launch.variants) == 1 for launch in alone)
    assert {launch.variants[0]: launch.gpus for launch in alone} == {
        name: 2 if variant.gpus > 1 else 1 for name, variant in VARIANTS.items() if name not in launches[0].variants}
    # the compiled ones last: they take longest to start, and the deadline drops what is left
    assert [VARIANTS[launch.variants[0]].mode for launch in alone[-2:]] == ["compiled", "compiled"]


def test_every_data_parallel_variant_has_a_one_gpu_reference_for_its_step():
    singles = {(v.layers, v.mode, v.adamw) for v in VARIANTS.values() if v.gpus == 1}
    for variant in VARIANTS.values():
        modes = {variant.mode, "eager"} if variant.eager_if_capture_fails else {variant.mode}
        assert all((variant.layers, mode, variant.adamw) in singles for mode in modes), variant.name


def test_a_failed_launch_is_reported_by_the_exception_a_worker_raised_not_by_torchrun():
    # Given a torchrun log as it ends when both workers raise
    log = "\n".join([
        "[rank1]: Traceback (most recent call last):",
        "[rank1]: TypeError: BF16 all reduce communication hook required CUDA 11+ and NCCL 2.10+",
        "[rank0]: torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:",
        "    raise ChildFailedError(",
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "  error_file: <N/A>",
        "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html",
    ])
    # Then the reason given is the last worker exception
    assert library.last_exception(log) == "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:"
    assert library.last_exception("[rank0]: step 3\nexit") is None


# --- end to end on two gloo ranks ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_cpu_smoke_run_measures_what_gloo_can_run_and_reports_what_needs_cuda(tmp_path, capsys):
    # Given a doc and a tiny run of one reference, DDP on two gloo ranks and the hand-written path
    doc = tmp_path / "benchmarks.md"
    # When it runs
    library.main(["--variants", "autocast-eager,ddp,hand-written", "--widths", "16", "--features", "8",
                  "--batch-size", "64", "--warmup-steps", "2", "--steps-per-window", "2", "--windows", "3",
                  "--raw-dir", str(tmp_path / "raw"), "--doc", str(doc)])
    # Then its section holds DDP measured on two ranks whose parameters agree, against the 1-rank reference
    section = doc.read_text().split(f"<!-- {library.SECTION}:start -->")[1].split(f"<!-- {library.SECTION}:end -->")[0]
    table = [line.split("|")[1:-1] for line in section.splitlines() if line.startswith("| ")]
    header = [cell.strip() for cell in table[0]]
    rows = {row[0].strip(): [cell.strip() for cell in row] for row in table[1:]}
    ddp = rows["ddp"]
    assert ddp[header.index("GPUs")] == "2" and ddp[header.index("step")] == "eager"
    assert float(ddp[header.index("samples/s")].replace(",", "")) > 0
    assert ddp[header.index("ranks agree")] == "yes"
    assert ddp[header.index("scaling eff.")].endswith("%")
    assert ddp[header.index("wrapper / optimizer")] == "DistributedDataParallel / AdamW"
    # And the hand-written path, which needs CUDA and NCCL, is reported as such rather than left out
    assert rows["hand-written"][header.index("samples/s")].startswith("needs CUDA and NCCL")
    assert "Decision: _(lead" in section and "CPU only (smoke run, gloo)" in section
    assert "| ddp |" in capsys.readouterr().out
