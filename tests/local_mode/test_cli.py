"""`python -m local_mode` options: a container profile is chosen by framework version and must run the distribution;
the watchdog's timing in seconds comes whole or not at all."""

from __future__ import annotations

import pytest

from local_mode.cli import parse_options
from local_mode.demo import demo_manifest
from local_mode.tuning_demo import parameter_ranges


def test_a_profile_and_a_distribution_it_runs_are_accepted():
    options = parse_options(["--framework-version", "2.2.0", "--distribution", "pytorchddp"])
    assert (options.framework_version, options.distribution) == ("2.2.0", "pytorchddp")


def test_by_default_the_job_runs_in_this_environment():
    assert parse_options([]).framework_version is None


def test_a_distribution_the_container_does_not_run_is_refused_naming_the_fix(capsys):
    with pytest.raises(SystemExit):
        parse_options(["--framework-version", "2.8.0", "--distribution", "pytorchddp"])
    assert ("--distribution pytorchddp does not run in the PyTorch 2.8.0 container: use one of "
            "['none', 'torch_distributed']") in capsys.readouterr().err


def test_an_unsupported_framework_version_is_refused_listing_the_supported(capsys):
    with pytest.raises(SystemExit):
        parse_options(["--framework-version", "1.13.1"])
    assert "'2.2.0'" in capsys.readouterr().err


def test_the_watchdog_keeps_the_stacks_timing_unless_both_seconds_are_given():
    assert parse_options([]).watchdog_timing is None
    timing = parse_options(["--stall-seconds", "30", "--stall-check-seconds", "5"]).watchdog_timing
    assert (timing.stall_seconds, timing.period_seconds) == (30, 5.0)


@pytest.mark.parametrize(("argv", "message"), [
    (["--stall-seconds", "30"], "--stall-seconds and --stall-check-seconds go together"),
    (["--stall-seconds", "0", "--stall-check-seconds", "5"], "use positive numbers"),
])
def test_a_partial_or_bad_watchdog_timing_is_refused_naming_the_fix(argv, message, capsys):
    with pytest.raises(SystemExit):
        parse_options(argv)
    assert message in capsys.readouterr().err


def test_tune_ranges_become_the_tuning_jobs_parameter_ranges():
    options = parse_options(["--tune", "learning-rate=continuous:0.0001:0.1:log", "--tune", "epochs=integer:1:5",
                             "--max-parallel-jobs", "2"])
    assert options.tuning.max_jobs == 4 and options.tuning.max_parallel_jobs == 2
    assert parameter_ranges(options.tuning.ranges) == {
        "ContinuousParameterRanges": [{"Name": "learning-rate", "MinValue": "0.0001", "MaxValue": "0.1",
                                       "ScalingType": "Logarithmic"}],
        "IntegerParameterRanges": [{"Name": "epochs", "MinValue": "1", "MaxValue": "5", "ScalingType": "Linear"}]}
    assert parse_options([]).tuning is None
    assert parse_options(["--tune", "loss=categorical:listnet,lambdarank", "--strategy", "Grid"]).tuning.max_jobs is None


def test_a_bad_tune_spec_is_refused_naming_the_fix(capsys):
    with pytest.raises(SystemExit):
        parse_options(["--tune", "epochs=1:5"])
    assert "--tune epochs=1:5: write NAME=continuous:MIN:MAX[:log]" in capsys.readouterr().err


def test_tune_options_become_the_manifests_tuning_section():
    options = parse_options(["--tune", "learning-rate=continuous:0.0001:0.1:log", "--tune", "epochs=integer:1:5",
                             "--tune", "loss=categorical:listnet,lambdarank", "--random-seed", "3"])
    assert demo_manifest(options)["tuning"] == {
        "objective_metric": "val_ndcg@10", "objective_type": "Maximize", "strategy": "Random", "max_jobs": 4,
        "max_parallel_jobs": 2, "early_stopping": "Off", "random_seed": 3,
        "ranges": {"learning-rate": {"type": "continuous", "min": 0.0001, "max": 0.1, "scaling": "Logarithmic"},
                   "epochs": {"type": "integer", "min": 1, "max": 5, "scaling": "Linear"},
                   "loss": {"type": "categorical", "values": ["listnet", "lambdarank"]}}}
    assert "tuning" not in demo_manifest(parse_options([]))
