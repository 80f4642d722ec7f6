"""Smoke tests of the benchmarks' CPU parts: the arithmetic and launch plans behind the GPU figures, the timing
protocol, the report writer, and the data-path benchmark run end to end at a tiny size."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from benchmarks.cpu import data_pipeline
from benchmarks.gpu import gpu_scaling
from benchmarks.harness import timing
from ranker.training import timeline
from benchmarks.baselines.common import dense_mlp
from benchmarks.gpu.gpu_scaling import Layout, analyse, launch_commands, model_runs
from benchmarks.harness.models import PLAIN_MLP, SHIPPED_MODEL, benchmark_model, training_flops_per_sample
from benchmarks.harness.report import markdown_table, write_section

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def _result(trainer: str, width: int, world_size: int, rate: float, nodes: int = 1, model: str = PLAIN_MLP) -> dict:
    return {"trainer": trainer, "model": model, "width": width, "world_size": world_size, "nodes": nodes,
            "samples_per_second": rate, "peak_memory_gib": 1.25,
            "flops_per_sample": training_flops_per_sample(benchmark_model(model, width), 136)}


def _percent(cell: str) -> float:
    return float(cell.rstrip("%")) / 100


HAND_MADE_RESULTS = [
    _result("native", 1024, 1, 2_400_000.0),
    _result("native", 1024, 2, 4_500_000.0),
    _result("native", 1024, 2, 4_300_000.0, nodes=2),
    _result("lightning", 1024, 1, 2_300_000.0),
    _result("naive-ddp", 1024, 1, 150_000.0),
    _result("naive-ddp", 1024, 2, 260_000.0),
]


# --- benchmarks.gpu.gpu_scaling: the table's arithmetic ---------------------------------------------------------------


def _rows_by_key(rows: list[list[object]], model: str = PLAIN_MLP) -> dict[tuple[str, str], list[object]]:
    """The rows of `model` by (trainer, layout)."""
    return {(row[1], row[3]): row for row in rows if row[0] == model}


def test_scaling_efficiency_is_the_rate_over_world_size_times_the_same_trainers_single_gpu_rate():
    # Given hand-made results for one trainer on 1 GPU, 2 GPUs and 2 emulated hosts
    native = {(r["world_size"], r["nodes"]): r["samples_per_second"]
              for r in HAND_MADE_RESULTS if r["trainer"] == "native"}
    # When they are analysed
    headers, rows = analyse(HAND_MADE_RESULTS, matmul_tflops=800.0)
    rows = _rows_by_key(rows)
    column = headers.index("scaling eff.")
    # Then each multi-GPU row's efficiency is its rate over N x the 1-GPU rate (to the table's 0.1% precision)
    for (world, nodes), label in [((2, 1), "2 GPUs"), ((2, 2), "2 GPUs as 2 hosts")]:
        expected = native[(world, nodes)] / (world * native[(1, 1)])
        assert _percent(rows[("native", label)][column]) == pytest.approx(expected, abs=5e-4)


def test_mfu_is_model_flops_per_gpu_over_the_measured_matmul_rate():
    # Given a 1-GPU and a 2-GPU result and a matmul rate measured in the same run
    matmul_tflops = 650.0
    headers, rows = analyse(HAND_MADE_RESULTS, matmul_tflops)
    rows = _rows_by_key(rows)
    column = headers.index("MFU")
    # Then MFU divides each GPU's share of the model FLOPs by that rate
    for result, label in [(HAND_MADE_RESULTS[0], "1 GPU"), (HAND_MADE_RESULTS[1], "2 GPUs")]:
        flops_per_gpu = result["samples_per_second"] * result["flops_per_sample"] / result["world_size"]
        expected = flops_per_gpu / (matmul_tflops * 1e12)
        assert _percent(rows[("native", label)][column]) == pytest.approx(expected, abs=5e-4)


def test_mfu_is_left_blank_without_a_matmul_rate():
    headers, rows = analyse(HAND_MADE_RESULTS, matmul_tflops=None)
    assert {row[headers.index("MFU")] for row in rows} == {"-"}


def test_vs_native_and_speed_up_compare_against_the_same_width_and_layout():
    # Given native, Lightning and naive DDP results on 1 GPU
    rates = {r["trainer"]: r["samples_per_second"] for r in HAND_MADE_RESULTS if r["world_size"] == 1}
    # When they are analysed
    headers, rows = analyse(HAND_MADE_RESULTS, matmul_tflops=800.0)
    lightning = _rows_by_key(rows)[("lightning", "1 GPU")]
    # Then Lightning is shown relative to native, and its speed-up over the naive baseline is the ratio of rates
    assert _percent(lightning[headers.index("vs native")]) == pytest.approx(rates["lightning"] / rates["native"] - 1,
                                                                           abs=5e-4)
    assert float(lightning[headers.index("x naive DDP")].rstrip("x")) == pytest.approx(
        rates["lightning"] / rates["naive-ddp"], abs=0.05)
    assert _rows_by_key(rows)[("native", "1 GPU")][headers.index("vs native")] == "-"


def test_the_shipped_model_is_measured_against_the_plain_mlp_of_the_same_trainer_and_width():
    # Given the shipped model and the plain MLP at one width, for native and Lightning, and the plain MLP wider
    results = [_result("native", 128, 1, 30e6), _result("lightning", 128, 1, 20e6),
               _result("native", 128, 1, 18e6, model=SHIPPED_MODEL), _result("lightning", 128, 1, 15e6,
                                                                                 model=SHIPPED_MODEL),
               _result("native", 1024, 1, 9e6)]
    headers, rows = analyse(results, matmul_tflops=800.0)
    shipped = _rows_by_key(rows, SHIPPED_MODEL)
    column = headers.index("vs plain MLP")
    # Then each shipped row is its rate against the same trainer's plain MLP at the same width, never another width
    assert _percent(shipped[("native", "1 GPU")][column]) == pytest.approx(18 / 30 - 1, abs=5e-4)
    assert _percent(shipped[("lightning", "1 GPU")][column]) == pytest.approx(15 / 20 - 1, abs=5e-4)
    assert {row[column] for row in rows if row[0] == PLAIN_MLP} == {"-"}
    # And "vs native" compares within a model: Lightning's shipped row against native's shipped row
    assert _percent(shipped[("lightning", "1 GPU")][headers.index("vs native")]) == pytest.approx(15 / 18 - 1,
                                                                                                 abs=5e-4)


def test_every_trainer_trains_the_plain_mlp_and_the_projects_trainers_also_the_shipped_model_at_its_width():
    runs = model_runs(["native", "lightning", "naive-ddp"], "1024,4096", 128)
    assert runs == [("native", PLAIN_MLP, "1024,4096"), ("lightning", PLAIN_MLP, "1024,4096"),
                    ("naive-ddp", PLAIN_MLP, "1024,4096"), ("native", SHIPPED_MODEL, "128"),
                    ("native", PLAIN_MLP, "128"), ("lightning", SHIPPED_MODEL, "128"), ("lightning", PLAIN_MLP, "128")]
    # A shipped width already among the plain widths is not measured twice; 0 leaves the shipped model out
    assert model_runs(["native"], "1024", 1024) == [("native", PLAIN_MLP, "1024"), ("native", SHIPPED_MODEL, "1024")]
    assert model_runs(["native"], "1024", 0) == [("native", PLAIN_MLP, "1024")]


# --- benchmarks.gpu.gpu_scaling: how each layout is launched ----------------------------------------------------------


def test_one_gpu_is_one_standalone_torchrun_on_device_zero():
    [(command, env)] = launch_commands(Layout(1, 1), "native", ["--widths", "1024"])
    assert command[:3] == [sys.executable, "-m", "torch.distributed.run"]
    assert "--standalone" in command and "--nproc_per_node=1" in command
    # The project trainers share one module, so the trainer is named on its command line
    assert command[command.index("-m", 3) + 1:][:3] == ["benchmarks.gpu.project_trainers", "--trainer", "native"]
    assert env == {"CUDA_VISIBLE_DEVICES": "0"}


def test_two_gpus_are_one_torchrun_with_two_processes_seeing_both_devices():
    [(command, env)] = launch_commands(Layout(2, 1), "naive-ddp", [])
    assert "--nproc_per_node=2" in command
    assert "--trainer" not in command  # a baseline is a module of its own
    assert command[-1] == gpu_scaling.TRAINER_MODULES["naive-ddp"]
    assert env == {"CUDA_VISIBLE_DEVICES": "0,1"}


def test_two_emulated_hosts_are_two_torchrun_agents_with_their_own_device_first_and_one_rendezvous():
    # Given 2 GPUs laid out as 2 hosts
    launches = list(launch_commands(Layout(2, 2), "lightning", []))
    # Then there is one torchrun agent per host, each with its node rank, meeting at one address
    assert len(launches) == 2
    for node_rank, (command, _) in enumerate(launches):
        assert "--nnodes=2" in command and f"--node_rank={node_rank}" in command and "--nproc_per_node=1" in command
        assert "--standalone" not in command
    ports = {flag for command, _ in launches for flag in command if flag.startswith("--master_port=")}
    assert len(ports) == 1
    # And each sees both GPUs, its own as device 0 (where LOCAL_RANK 0 lands), as on a real multi-GPU host
    assert [env for _, env in launches] == [{"CUDA_VISIBLE_DEVICES": "0,1"}, {"CUDA_VISIBLE_DEVICES": "1,0"}]


def test_emulated_hosts_of_several_gpus_see_their_own_gpus_first_in_order():
    launches = list(launch_commands(Layout(8, 2), "native", []))
    assert [env["CUDA_VISIBLE_DEVICES"] for _, env in launches] == ["0,1,2,3,4,5,6,7", "4,5,6,7,0,1,2,3"]
    assert all("--nproc_per_node=4" in command for command, _ in launches)


# --- benchmarks.harness.timing ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("features", "width"), [(136, 64), (10, 32)])
def test_flops_per_sample_counts_three_passes_of_two_flops_per_weight_of_the_real_models(features, width):
    from ranker.model.mlp import RankingMLP

    # Given the naive baselines' nn.Sequential and the project's plain MLP of the same shape
    naive = dense_mlp(features, width)
    naive_weights = sum(module.weight.numel() for module in naive if isinstance(module, nn.Linear))
    plain = benchmark_model(PLAIN_MLP, width, features)
    # Then a training step's FLOPs per sample are forward (2 per weight) plus backward (twice forward), alike for both
    assert training_flops_per_sample(plain, features) == 3 * 2 * naive_weights
    # And the shipped model's count adds its per-feature embeddings' weights to its dense layers'
    shipped = benchmark_model(SHIPPED_MODEL, width, features)
    weights = sum(parameter.numel() for name, parameter in RankingMLP(shipped).named_parameters()
                  if name.endswith("weight") and parameter.dim() > 1)
    assert training_flops_per_sample(shipped, features) == 3 * 2 * weights


def test_step_windows_time_the_requested_windows_after_the_warm_up():
    # Given windows of 2 steps after 3 warm-up steps
    windows = timing.StepWindows(warmup_steps=3, steps_per_window=2, windows=4, device=torch.device("cpu"))
    # When all but the last step have been taken, the last window is still open
    for _ in range(windows.total_steps - 1):
        windows.step_done()
    assert not windows.finished and len(windows.window_seconds) == 3
    # Then the last step closes it: exactly the requested windows, none from the warm-up
    windows.step_done()
    assert windows.finished and len(windows.window_seconds) == 4
    assert windows.total_steps == 3 + 2 * 4


# --- benchmarks.harness.report ----------------------------------------------------------------------------------------


def test_write_section_replaces_only_its_own_section(tmp_path):
    # Given a doc with two sections
    doc = tmp_path / "benchmarks.md"
    write_section("first", "First", "old first", doc=doc)
    write_section("second", "Second", "second body", doc=doc)
    before_second = doc.read_text().split("<!-- second:start -->")[1]
    # When the first is written again
    write_section("first", "First", "new first", doc=doc)
    text = doc.read_text()
    # Then it is replaced in place and the second is untouched
    assert "new first" in text and "old first" not in text
    assert text.count("<!-- first:start -->") == 1
    assert text.split("<!-- second:start -->")[1] == before_second
    assert text.index("<!-- first:start -->") < text.index("<!-- second:start -->")


# --- benchmarks.cpu.data_pipeline -------------------------------------------------------------------------------------


def _gpu_scaling_section(doc, results: list[dict]) -> None:
    """Writes a gpu-scaling section the way benchmarks.gpu.gpu_scaling renders it."""
    headers, rows = analyse(results, matmul_tflops=800.0)
    body = "- Machine: test GPU\n\n" + markdown_table(headers, rows)
    write_section("gpu-scaling", "GPU throughput and scaling", body, doc=doc)


def test_recorded_gpu_rates_read_the_native_single_gpu_rows_that_gpu_scaling_renders(tmp_path):
    # Given a gpu-scaling section rendered from results at two widths
    doc = tmp_path / "benchmarks.md"
    results = HAND_MADE_RESULTS + [_result("native", 4096, 1, 1_100_000.0), _result("native", 4096, 2, 2_000_000.0)]
    _gpu_scaling_section(doc, results)
    # When the data benchmark reads it back
    rates, machine = data_pipeline.recorded_gpu_rates(doc)
    # Then it finds the native trainer's 1-GPU rate for each width (the table rounds to whole samples/s)
    expected = {r["width"]: r["samples_per_second"]
                for r in results if r["trainer"] == "native" and r["world_size"] == 1}
    assert rates == pytest.approx(expected, abs=1)
    assert machine == "test GPU"


def test_recorded_gpu_rates_are_empty_without_a_gpu_section(tmp_path):
    assert data_pipeline.recorded_gpu_rates(tmp_path / "absent.md") == ({}, None)


def _section(doc, name: str) -> str:
    return doc.read_text().split(f"<!-- {name}:start -->")[1].split(f"<!-- {name}:end -->")[0]


TINY_RUN = ["--queries", str(data_pipeline.BATCH_QUERIES + 44), "--docs-per-query", "4", "--features", "8",
            "--repeats", "1", "--stream-batches", "3"]


def test_data_pipeline_at_a_tiny_size_writes_its_section_and_says_the_gpu_figures_are_absent(tmp_path, capsys):
    # Given a doc with another benchmark's section and no GPU figures
    doc = tmp_path / "benchmarks.md"
    write_section("trigger_latency", "Trigger", "kept as is", doc=doc)
    # When the data benchmark runs at a tiny size, with one job run (a baseline revision's tree has its own test below:
    # its entry points' imports are timed as this tree's are). One run, not the default three, still shows that the
    # count is kept; a second would repeat the loop's body for one more train_ddp.py start (~6 s of CPU).
    data_pipeline.main([*TINY_RUN, "--job-repeats", "1", "--import-repeats", "1", "--doc", str(doc)])
    # Then its section holds a row per stage with positive rates, says there is nothing to compare with,
    # and leaves the other section alone
    section = _section(doc, "data-pipeline")
    stage_rows = [line for line in section.splitlines()
                  if line.startswith(("| parse:", "| convert:", "| stream:", "| fill:"))]
    # parse with scikit-learn, with one worker process and with ranker's reader, convert, stream, fill with one
    # thread and with the default threads
    assert len(stage_rows) == 7
    assert all(float(row.split("|")[3].replace(",", "")) > 0 for row in stage_rows)
    # and the whole job ran once (the benchmark fails if its log lacks the `ingest:` line), beside the loader alone,
    # ingest a part of its time, and the target counted over the runs
    job_rows = [line.split("|") for line in section.splitlines() if line.startswith(("| 1 |", "| 2 |"))]
    assert len(job_rows) == 1
    for _, run, code, loader, job, ratio, ingest, rest, _ in job_rows:
        assert code.strip() == "this tree"
        # (the table rounds the seconds to 0.01 s: the ratio lies between the bounds those roundings leave)
        assert float(job) / (float(loader) + 0.005) - 0.01 <= float(ratio) <= \
            float(job) / max(float(loader) - 0.005, 1e-3) + 0.01
        assert 0 <= float(ingest) < float(job)
    assert re.search(r"met in [01] of 1 runs", section)
    # and each run's phases, from process start to the model on disk, in the order the job reaches them
    phase_rows = {line.split("|")[1].strip(): line.split("|")[2:4] for line in section.splitlines()
                  if line.startswith("| ") and "(+" in line}
    assert list(phase_rows) == [*timeline.PHASES, "exit"]
    reached = [float(cells[0].split("(")[0]) for cells in phase_rows.values()]
    assert reached == sorted(reached) and reached[-1] == pytest.approx(float(job_rows[0][4]), abs=0.01)
    # and both entry points' imports were timed, beside torch's and Lightning's
    import_rows = {(line.split("|")[1].strip(), line.split("|")[2].strip()): line.split("|")
                   for line in section.splitlines() if line.startswith(("| train_", "| `import"))}
    assert set(import_rows) == {("`import torch` alone", "-"), ("`import lightning` alone", "-")} | {
        (script, "this tree") for script in data_pipeline.ENTRY_POINTS}
    assert all(float(row[3]) > 0 for row in import_rows.values())
    assert "lightning" in import_rows["train_lightning.py", "this tree"][4]
    assert "No GPU figures to compare with" in section
    assert _section(doc, "trigger_latency").strip().endswith("kept as is")
    assert "| stream" in capsys.readouterr().out


def test_a_baseline_revision_is_training_code_as_that_commit_holds_it(tmp_path):
    # Given a revision (`--import-baseline REF`, `--job-baseline REF`): the benchmark runs its entry points beside this
    # tree's, so it needs that revision's training_code/ as a folder of its own
    committed = subprocess.run(["git", "ls-tree", "-r", "--name-only", "HEAD", "training_code"], cwd=PROJECT_ROOT,
                               capture_output=True, text=True, check=True).stdout.split()
    # When it is unpacked
    tree = data_pipeline.revision_tree("HEAD", tmp_path)
    # Then it is a folder of its own holding exactly the revision's files, as the revision holds them
    assert tree.is_relative_to(tmp_path) and (tree / "train_ddp.py").is_file()
    unpacked = sorted(path.relative_to(tree.parent).as_posix() for path in tree.rglob("*") if path.is_file())
    assert unpacked == sorted(committed)
    for name in ("training_code/train_ddp.py", "training_code/train_lightning.py"):
        assert (tree.parent / name).read_bytes() == subprocess.run(["git", "show", f"HEAD:{name}"], cwd=PROJECT_ROOT,
                                                                   capture_output=True, check=True).stdout


def test_data_pipeline_counts_the_loaders_each_recorded_gpu_rate_needs(tmp_path):
    # Given GPU figures one loader surely keeps up with (1 doc/s) and surely cannot (10^12 docs/s)
    doc = tmp_path / "benchmarks.md"
    _gpu_scaling_section(doc, [_result("native", 64, 1, 1.0), _result("native", 8192, 1, 1e12)])
    # When the data benchmark runs (the whole job and the imports left out: the test above runs them)
    data_pipeline.main([*TINY_RUN, "--job-repeats", "0", "--import-repeats", "0", "--doc", str(doc)])
    # Then each width needs ceil(GPU rate / one loader thread's rate) threads, from the rate it measured
    section = _section(doc, "data-pipeline")
    fill_row = next(line for line in section.splitlines() if line.startswith("| fill"))
    loader_rate = float(fill_row.split("|")[3].replace(",", ""))
    demand = {int(line.split("|")[1]): line.split("|") for line in section.splitlines()
              if line.startswith(("| 64 ", "| 8192 "))}
    assert demand[64][5].strip() == "yes" and int(demand[64][6]) == 1
    assert demand[8192][5].strip().startswith("no")
    # the table rounds the loader rate to whole docs/s (a relative error below 1e-5 at these rates)
    assert int(demand[8192][6]) == pytest.approx(math.ceil(1e12 / loader_rate), rel=1e-5)
    assert "width 8192 needs" in section and "width 64 needs" not in section


# --- benchmarks.gpu.project_trainers: both trainers under torchrun on CPU ---------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("trainer", ["native", "lightning"])
def test_project_trainers_run_under_torchrun_with_two_gloo_ranks(tmp_path, trainer):
    # Given the project trainer launched as the GPU benchmark launches it, on 2 CPU ranks at a tiny size
    results = tmp_path / "results.jsonl"
    [(command, _)] = launch_commands(Layout(2, 1), trainer, [
        "--widths", "16", "--features", "8", "--batch-size", "64", "--warmup-steps", "1", "--steps-per-window", "1",
        "--windows", "2", "--results", str(results)])
    # When it runs
    finished = subprocess.run(command, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)
    # Then rank 0 records one result for the whole 2-rank job
    assert finished.returncode == 0, finished.stdout[-2000:] + finished.stderr[-2000:]
    [result] = [json.loads(line) for line in results.read_text().splitlines()]
    assert (result["trainer"], result["world_size"], result["width"]) == (trainer, 2, 16)
    assert len(result["window_samples_per_second"]) == 2 and result["samples_per_second"] > 0


def _kernel(name: str, start: float, duration: float, stream: int = 7) -> dict:
    return {"ph": "X", "cat": "kernel", "name": name, "ts": start, "dur": duration, "args": {"stream": stream}}


def test_the_profile_breakdown_splits_kernel_time_and_finds_exposed_communication():
    from benchmarks.gpu.gpu_profile import breakdown

    # Given 2 steps of a trace (µs): a GEMM, a ReLU, the optimizer, and an all-reduce on its own stream that overlaps
    # the GEMM of each step for 30 µs and then runs 20 µs alone
    trace = {"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 500}]}
    for step in range(2):
        t = step * 200.0
        trace["traceEvents"] += [
            _kernel("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT", t, 100),
            _kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", t + 70, 50, stream=9),
            _kernel("vectorized_elementwise_kernel<clamp_scalar>", t + 120, 20),
            _kernel("multi_tensor_apply_kernel<FusedOptimizer>", t + 150, 30),
        ]
    # When it is broken down per step
    rows, heaviest = breakdown(trace, steps=2)
    figures = dict(rows)
    # Then each class has its time per step (in ms), NCCL is split into hidden and exposed, and idle time is what no
    # kernel covers: the trace spans 380 µs, kernels cover 170 µs of each step (10 µs gap before the optimizer, and
    # 20 µs between the steps)
    assert figures["kernels: matrix products"] == pytest.approx(0.100)
    assert figures["kernels: communication"] == pytest.approx(0.050)
    assert figures["kernels: optimizer"] == pytest.approx(0.030)
    assert figures["kernels: elementwise and reductions"] == pytest.approx(0.020)
    assert figures["NCCL hidden under compute"] == pytest.approx(0.030)
    assert figures["NCCL exposed"] == pytest.approx(0.020)
    assert figures["wall time"] == pytest.approx(0.190)
    assert figures["GPU idle (no kernel running)"] == pytest.approx((380 - 2 * 170) / 2 / 1000)
    assert heaviest[0][0].startswith("nvjet") and heaviest[0][2] == 1


def test_the_profile_breakdown_refuses_a_trace_without_gpu_kernels():
    from benchmarks.gpu.gpu_profile import breakdown

    with pytest.raises(SystemExit, match="no GPU kernels"):
        breakdown({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 5}]}, steps=1)


# --- benchmarks.ranking.time_to_model ---------------------------------------------------------------------------------


def test_time_to_model_splits_a_run_into_phases_that_add_up_to_its_wall():
    from benchmarks.ranking.time_to_model import PHASES, project_events

    # Given an entry point's log as it arrives (seconds since launch, line), with an ingest line per channel
    lines = [(4.0, "ingest: /data/rank.train: 10 queries, 80 documents x 12 features from 0.1 MB of text (50 MB/s) "
                   "in 2.00s"),
             (4.5, "ingest: /data/rank.test: 2 queries, 16 documents x 12 features from 0.0 MB of text (40 MB/s) in "
                   "0.40s"),
             (6.0, "epoch=0 step=10 train_loss=1.5 learning_rate=0.001 samples_per_second=1000"),
             (9.0, "epoch=1 step=20 train_loss=1.2 learning_rate=0.0005 samples_per_second=1100"),
             (9.5, "epoch=1 step=20 train_loss=1.2 val_loss=1.1 val_ndcg@10=0.6 test_ndcg@1=0.4 test_ndcg@10=0.61"),
             (10.0, "<exit>")]
    # When its events are read
    events, ndcg = project_events(lines)
    from benchmarks.ranking.time_to_model import Run

    phases = Run("native", 1, events, ndcg).phases()
    # Then ingest starts where the first ingest line says it began, and the phases are the gaps between events
    assert list(phases) == list(PHASES)
    assert phases == pytest.approx({"start-up": 2.0, "ingest": 2.5, "to device": 1.5, "training": 3.0,
                                    "evaluation": 0.5, "saving": 0.5})
    assert ndcg == 0.61


def test_the_second_gpu_pays_for_itself_from_fixed_cost_over_saving_per_epoch():
    from benchmarks.ranking.time_to_model import Run, payoff_statement

    def run(gpus: int, training: float, wall: float) -> Run:
        events = {"ingest start": 1.0, "ingest end": 2.0, "training start": 3.0, "training end": 3.0 + training,
                  "evaluation end": wall - 0.5, "exit": wall}
        return Run("native", gpus, events, 0.9)

    # 1 GPU: 10 s fixed + 20 s training over 10 epochs; 2 GPUs: 13 s fixed + 10 s training
    statement = payoff_statement([run(1, 20.0, 30.0), run(2, 10.0, 23.0)], epochs=10)
    # 1 s saved per epoch against 3 s more fixed cost: 3 epochs
    assert "from 3.0 epochs on" in statement and "faster at 10" in statement


def test_the_fixed_cost_table_gives_each_entry_point_and_code_the_medians_of_its_runs():
    from benchmarks.ranking.time_to_model import THIS_TREE, Run, fixed_cost_table

    def run(code: str, first_step: float, tail: float, wall: float) -> Run:
        marks = {"imported": 1.0, "first step": first_step, "trained": 10.0, "exported": 10.0 + tail}
        return Run("native", 1, {"exit": wall}, 0.9, phase_marks=marks, code=code)

    # Given three runs of this tree and three of a baseline, alternating, and a LightGBM run without a timeline
    runs = [run(THIS_TREE, 3.0, 1.0, 12.0), run("before", 4.0, 2.0, 14.0), run(THIS_TREE, 2.0, 1.5, 11.0),
            run("before", 5.0, 2.5, 15.0), run(THIS_TREE, 9.0, 0.5, 20.0), run("before", 4.5, 1.0, 13.0),
            Run("LightGBM lambdarank", 0, {"exit": 5.0}, 0.8)]
    rows = [line.split(" | ") for line in fixed_cost_table(runs).splitlines()[2:]]
    # Then one row per code: launch to first step, last step to export, their sum and launch to exit, each the median
    # over the code's runs (the sums' median: 3 + 1, 2 + 1.5, 9 + 0.5 give 4.0)
    assert [row[2:] for row in rows] == [[THIS_TREE, "3", "3.00", "1.00", "4.00", "12.00 |"],
                                         ["before", "3", "4.50", "2.00", "6.00", "14.00 |"]]


def test_time_to_model_refuses_an_unknown_run_before_it_writes_any_data(tmp_path, capsys):
    from benchmarks.ranking import time_to_model

    with pytest.raises(SystemExit):
        time_to_model.main(["--device", "cpu", "--runs", "native,lightgbn", "--work", str(tmp_path / "work")])
    assert "--runs: lightgbn is not a run; choose from native, lightning, plain, lightgbm" in capsys.readouterr().err
    assert not (tmp_path / "work").exists()


@pytest.mark.slow
def test_time_to_model_at_a_tiny_size_on_cpu_writes_its_section(tmp_path):
    from benchmarks.ranking import time_to_model

    # When the native entry point and the plain script run on one CPU process at a tiny size
    doc = tmp_path / "benchmarks.md"
    time_to_model.main(["--device", "cpu", "--queries", "40", "--docs-per-query", "6", "--features", "8", "--epochs",
                        "1", "--gpus", "1", "--runs", "native,plain,lightgbm", "--lightgbm-rounds", "3",
                        "--work", str(tmp_path / "work"), "--doc", str(doc)])
    # Then each row has a wall time that its phases add up to and a held-out NDCG@10 in [0, 1]
    rows = {line.split("|")[1].strip(): [cell.strip() for cell in line.split("|")[2:-1]]
            for line in _section(doc, "time-to-model").splitlines() if line.startswith("| ") and "GPUs" not in line}
    for name in ("native", "plain PyTorch"):
        cells = rows[name]
        wall, phases, ndcg = float(cells[1]), [float(cell) for cell in cells[2:8]], float(cells[8])
        # (each cell is rounded to 0.1 s, so six of them may miss the wall by up to 0.3 s)
        assert wall > 0 and sum(phases) == pytest.approx(wall, abs=0.31) and 0 <= ndcg <= 1
    lightgbm = rows["LightGBM lambdarank"]
    # (LightGBM is a wheel carried to the GPU host; where it is missing its row says so instead of a time)
    assert lightgbm[-1].startswith("not installed") or float(lightgbm[1]) > 0
