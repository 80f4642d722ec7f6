"""The channels' text parsed ahead of the entry point's imports: the rows collected are those a parse at load time
gives, a file changed in between is parsed again, and nothing starts where a parse ahead could waste work."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import time

import numpy as np
import pytest
from ranker.config import parse_config
from ranker.data import channels, letor_parser, letor_processes
from ranker.data.synthetic import generate, write_letor
from ranker.training import early_parse
from ranker.training.session import load_splits
from sagemaker_distributed.topology import detect_topology

from training_launch import TRAINING_CODE, script_env

SINGLE_PROCESS = script_env()


@pytest.fixture
def tiny_ranges(monkeypatch):
    """Every file goes to worker processes, each parsing its range in chunks of a few lines."""
    monkeypatch.setattr(letor_processes, "MIN_BYTES_PER_PROCESS", 1)
    monkeypatch.setattr(letor_parser, "CHUNK_BYTES", 300)


@pytest.fixture
def channel(tmp_path):
    folder = tmp_path / "train"
    write_letor(generate(num_queries=40, docs_per_query=6, num_features=9, seed=5), folder, with_qid=True)
    return folder


@pytest.fixture
def collected():
    """Files whose parse a test started ahead: collected afterwards, so no workers outlive the test."""
    started = []
    yield started
    for path in started:
        if letor_processes.parsing_since(path) is not None:
            letor_processes.parse_file(path)


@pytest.mark.slow  # starts worker processes
def test_rows_parsed_ahead_are_the_rows_a_parse_at_load_time_gives(channel, tiny_ranges):
    (path,) = channels.letor_files(channel)
    expected = letor_processes.parse_file(path)
    letor_processes.parse_ahead(path)
    assert letor_processes.parsing_since(path) is not None
    parsed = letor_processes.parse_file(path, num_features=12)  # a width decided once the parse has run
    assert letor_processes.parsing_since(path) is None  # collected, not parsed again
    np.testing.assert_array_equal(parsed.features[:, :9], expected.features)
    assert not parsed.features[:, 9:].any()
    np.testing.assert_array_equal(parsed.labels, expected.labels)
    np.testing.assert_array_equal(parsed.qids, expected.qids)


@pytest.mark.slow
def test_workers_started_ahead_yield_the_cpu_to_the_imports_they_run_beside(channel, tiny_ranges, collected):
    (path,) = channels.letor_files(channel)
    letor_processes.parse_ahead(path)
    collected.append(path)
    # The workers wait for the parent's orders once they have parsed their ranges: alive until collected
    workers = [child for child in multiprocessing.active_children() if child.name.startswith("letor-parser-")]
    assert workers
    ours = os.getpriority(os.PRIO_PROCESS, 0)
    expected = {min(ours + letor_processes.AHEAD_NICENESS, 19)}
    deadline = time.monotonic() + 30  # each worker lowers its own priority as it starts
    while {os.getpriority(os.PRIO_PROCESS, worker.pid) for worker in workers} != expected:
        assert time.monotonic() < deadline, "the workers started ahead kept the parent's priority"
        time.sleep(0.01)
    assert os.getpriority(os.PRIO_PROCESS, 0) == ours


@pytest.mark.slow
def test_a_file_changed_after_its_parse_started_is_parsed_again(tmp_path, tiny_ranges):
    path = tmp_path / "rank.train"
    path.write_text("2 qid:1 1:0.5\n0 qid:1 2:0.25\n")
    letor_processes.parse_ahead(path)
    path.write_text("2 qid:1 1:0.5\n0 qid:1 3:0.25\n1 qid:2 1:1\n")
    parsed = letor_processes.parse_file(path)
    assert parsed.features.shape == (3, 3)
    np.testing.assert_array_equal(parsed.qids, [1, 1, 2])


def parse_in_child(path, results) -> None:
    parsed = letor_processes.parse_file(path)
    np.save(results, parsed.features)


@pytest.mark.slow
def test_a_forked_child_parses_for_itself_and_leaves_the_parents_parse_to_the_parent(channel, tmp_path, tiny_ranges):
    (path,) = channels.letor_files(channel)
    letor_processes.parse_ahead(path)
    child = multiprocessing.get_context("fork").Process(target=parse_in_child, args=(path, tmp_path / "child.npy"))
    child.start()
    child.join(timeout=60)
    assert child.exitcode == 0
    assert letor_processes.parsing_since(path) is not None  # still the parent's to collect
    parsed = letor_processes.parse_file(path)
    np.testing.assert_array_equal(np.load(tmp_path / "child.npy"), parsed.features)


def run_flags(channel, tmp_path) -> list[str]:
    return ["--train", str(channel), "--model-dir", str(tmp_path / "model"), "--output-data-dir",
            str(tmp_path / "output"), "--checkpoint-dir", str(tmp_path / "checkpoints")]


@pytest.mark.slow
def test_a_lone_process_loads_the_rows_it_started_parsing_before_its_imports(channel, tmp_path, tiny_ranges,
                                                                              collected):
    # Given the parse of the training and test channels started as the entry point starts it
    test_channel = tmp_path / "test"
    write_letor(generate(num_queries=12, docs_per_query=5, num_features=9, seed=6), test_channel, with_qid=True)
    argv = run_flags(channel, tmp_path) + ["--test", str(test_channel)]
    config = parse_config(argv, SINGLE_PROCESS)
    expected = load_splits(config, detect_topology(SINGLE_PROCESS))
    early_parse.start(argv, "", SINGLE_PROCESS)
    paths = [*channels.letor_files(channel), *channels.letor_files(test_channel)]
    collected.extend(paths)
    assert all(letor_processes.parsing_since(path) is not None for path in paths)
    # When the session loads its data
    splits = load_splits(config, detect_topology(SINGLE_PROCESS))
    # Then it took the rows parsed ahead, and they split as those parsed at load time do
    assert all(letor_processes.parsing_since(path) is None for path in paths)
    for part, expected_part in ((splits.train, expected.train), (splits.validation, expected.validation),
                                (splits.test, expected.test)):
        np.testing.assert_array_equal(part.features, expected_part.features)
        np.testing.assert_array_equal(part.labels, expected_part.labels)
        np.testing.assert_array_equal(part.query_offsets, expected_part.query_offsets)


@pytest.mark.parametrize("extra_flags, env", [
    ([], script_env(RANK="0", WORLD_SIZE="2", LOCAL_RANK="0", LOCAL_WORLD_SIZE="2")),  # a host parses once for all
    (["--streaming", "true"], SINGLE_PROCESS),  # streamed runs read shards
], ids=["two-local-ranks", "streaming"])
def test_nothing_is_parsed_ahead_where_it_could_waste_work(channel, tmp_path, tiny_ranges, collected, extra_flags,
                                                           env):
    early_parse.start(run_flags(channel, tmp_path) + extra_flags, "", env)
    (path,) = channels.letor_files(channel)
    collected.append(path)
    assert letor_processes.parsing_since(path) is None


def test_a_flag_the_run_refuses_ends_the_process_before_torch_is_imported(channel, tmp_path):
    # Given an entry point's first step with a flag the run refuses, in a fresh interpreter as a job starts
    output = tmp_path / "sm-output"
    probe = ("import sys\nfrom ranker.training import early_parse\ntry:\n    early_parse.start(sys.argv[1:], '')\n"
             "except SystemExit as stop:\n    print(stop.code, 'torch' in sys.modules)\n")
    finished = subprocess.run([sys.executable, "-c", probe, *run_flags(channel, tmp_path), "--epochs", "0"],
                              cwd=TRAINING_CODE, env=script_env(SM_OUTPUT_DIR=str(output)), capture_output=True,
                              text=True, timeout=120)
    # Then it stopped with the usage status before torch was loaded, with the line and failure reason a job reports
    assert finished.stdout.split() == ["2", "False"], finished.stderr[-2000:]
    assert finished.stderr.strip().startswith("error: --epochs")
    assert (output / "failure").read_text().startswith("ConfigError: --epochs")
