"""`python -m local_mode` options: a container profile is chosen by framework version and must run the distribution;
the launch goes into the manifest, with one process per host under ModelTrainer's drivers; the watchdog's timing in
seconds comes whole or not at all."""

from __future__ import annotations

import pytest

from local_mode.cli import parse_options
from local_mode.demo import demo_manifest


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


def test_the_launch_is_the_manifests_when_given_and_the_stacks_default_otherwise():
    assert demo_manifest(parse_options(["--launch", "model_trainer"]))["training"]["launch"] == "model_trainer"
    assert "launch" not in demo_manifest(parse_options([]))["training"]


def test_ranks_per_host_under_model_trainers_drivers_are_refused_naming_the_fix(capsys):
    with pytest.raises(SystemExit):
        parse_options(["--launch", "model_trainer", "--instance-count", "2", "--processes-per-host", "2"])
    assert ("--processes-per-host 2 with --launch model_trainer: ModelTrainer's drivers start one process per GPU of "
            "the host, and local hosts have none, so one each; use --instance-count for more ranks") in (
        capsys.readouterr().err)


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


def test_tune_options_become_the_manifests_tuning_section_with_only_what_they_name():
    # Given ranges of each kind and two of the tuning job's options
    options = parse_options(["--tune", "learning-rate=continuous:0.0001:0.1:log", "--tune", "epochs=integer:1:5",
                             "--tune", "loss=categorical:listnet,lambdarank", "--tune", "dropout=continuous:0:0.5",
                             "--max-jobs", "4", "--random-seed", "3"])
    # Then the manifest's section holds them as docs/tuning.md writes them, and leaves the rest to the stack
    assert demo_manifest(options)["tuning"] == {
        "max_jobs": 4, "random_seed": 3,
        "ranges": {"learning-rate": {"type": "continuous", "min": 0.0001, "max": 0.1, "scaling": "Logarithmic"},
                   "epochs": {"type": "integer", "min": 1, "max": 5, "scaling": "Linear"},
                   "loss": {"type": "categorical", "values": ["listnet", "lambdarank"]},
                   "dropout": {"type": "continuous", "min": 0, "max": 0.5, "scaling": "Linear"}}}
    assert "tuning" not in demo_manifest(parse_options([]))


def test_a_tuning_jobs_own_options_name_their_section_keys():
    options = parse_options(["--tune", "loss=categorical:listnet,lambdarank", "--strategy", "Grid", "--objective",
                             "val_map", "--objective-type", "Maximize", "--max-parallel-jobs", "2",
                             "--early-stopping", "Off"])
    assert {key: value for key, value in options.tuning.items() if key != "ranges"} == {
        "strategy": "Grid", "objective_metric": "val_map", "objective_type": "Maximize", "max_parallel_jobs": 2,
        "early_stopping": "Off"}


@pytest.mark.parametrize(("argv", "message"), [
    (["--tune", "epochs=1:5"], "--tune epochs=1:5: write NAME=continuous:MIN:MAX[:log]"),
    (["--tune", "epochs=integer:1:five"], "--tune epochs=integer:1:five: 'five' is not a number"),
    (["--tune", "epochs=integer:1:5:exp"], "--tune epochs=integer:1:5:exp: write NAME=continuous"),
    (["--tune", "epochs=integer:1:5", "--tune", "epochs=integer:2:3"], "epochs is tuned twice"),
    (["--max-jobs", "4", "--strategy", "Grid"], "--strategy, --max-jobs: these shape a tuning job; name what it "
                                                "tunes with --tune NAME=SPEC"),
])
def test_a_bad_tune_option_is_refused_naming_the_fix(argv, message, capsys):
    with pytest.raises(SystemExit):
        parse_options(argv)
    assert message in capsys.readouterr().err
