"""`python -m local_mode [options]` (`make demo ARGS="..."`): the whole pipeline on this machine."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from local_mode.container_envs import MissingInterpreter
from local_mode.demo import DemoOptions, DemoResult, TriggerRefused, profiles, run_demo
from local_mode.tuning_demo import TuningOptions, TuningResult, parameter_ranges, render_tuning_summary
from local_mode.watchdog_schedule import WatchdogTiming

ENTRY_POINTS = ("train_lightning.py", "train_ddp.py")


def parse_options(argv: Sequence[str] | None) -> DemoOptions:
    defaults = DemoOptions()
    parser = argparse.ArgumentParser(prog="python -m local_mode", description=__doc__)
    parser.add_argument("--queries", type=int, default=defaults.queries, help="synthetic dataset size in queries")
    parser.add_argument("--epochs", type=int, default=defaults.epochs, help="training epochs (manifest override)")
    parser.add_argument("--entry-point", default=defaults.entry_point,
                        help=f"the script to run: one of {', '.join(ENTRY_POINTS)}, or with --source-dir any script "
                             "inside that folder")
    parser.add_argument("--source-dir", type=Path, default=None,
                        help="a folder of your own training code to bundle instead of training_code/ (the "
                             "sagemaker_distributed package is bundled beside it); see docs/bring-your-own.md")
    parser.add_argument("--hyperparameter", action="append", default=[], metavar="NAME=VALUE",
                        help="passed to the script as --NAME VALUE (repeatable)")
    parser.add_argument("--metric-definitions", default=None, metavar="JSON",
                        help='the job\'s MetricDefinitions, e.g. \'[{"Name": "loss", "Regex": "loss=([0-9.]+)"}]\'')
    parser.add_argument("--distribution", choices=profiles.DISTRIBUTIONS, default=defaults.distribution)
    parser.add_argument("--instance-count", type=int, default=defaults.instance_count,
                        help="local hosts (algo-1 .. algo-N)")
    parser.add_argument("--processes-per-host", type=int, default=defaults.processes_per_host,
                        help="CPU ranks per local host (GPUs per instance in the cloud)")
    parser.add_argument("--data", type=Path, default=None,
                        help="a folder to upload instead of generated data: its files as the train channel, or its train/, "
                             "validation/ and test/ subfolders as those channels")
    parser.add_argument("--work-dir", type=Path, default=defaults.work_dir,
                        help="where runs leave their data, job folders and outputs")
    parser.add_argument("--framework-version", choices=profiles.supported_versions(), default=None,
                        help="run the job in an environment like that AWS PyTorch container (its Python from pyenv, "
                             "its torch; built once, ~2 min) with the bundle's requirements.txt installed as the "
                             "container does; by default the job runs in this project's environment")
    parser.add_argument("--stall-seconds", type=int, default=None,
                        help="the stalled-job watchdog stops a job whose hosts have all been silent this long (the "
                             "stack's stall_minutes, in seconds); with --stall-check-seconds")
    parser.add_argument("--stall-check-seconds", type=float, default=None,
                        help="how often the watchdog looks (the stack's stall_check_minutes, in seconds)")
    tuning = parser.add_argument_group("tuning", "run a hyperparameter tuning job over the job (docs/tuning.md)")
    tuning.add_argument("--tune", action="append", default=[], metavar="NAME=SPEC",
                        help="a tuned hyperparameter (repeatable): NAME=continuous:MIN:MAX[:log], "
                             "NAME=integer:MIN:MAX[:log] or NAME=categorical:A,B,...")
    tuning.add_argument("--strategy", choices=("Random", "Grid", "Bayesian", "Hyperband"), default="Random",
                        help="the search strategy (Bayesian and Hyperband run as Random locally)")
    tuning.add_argument("--max-jobs", type=int, default=None,
                        help="trials to run (MaxNumberOfTrainingJobs); default 4, and for Grid every combination")
    tuning.add_argument("--max-parallel-jobs", type=int, default=2, help="trials running at once")
    tuning.add_argument("--objective", default="val_ndcg@10", help="the metric definition to optimise")
    tuning.add_argument("--objective-type", choices=("Maximize", "Minimize"), default="Maximize")
    tuning.add_argument("--random-seed", type=int, default=None, help="makes Random draws reproducible")
    tuning.add_argument("--early-stopping", choices=("Off", "Auto"), default="Off",
                        help="TrainingJobEarlyStoppingType (not emulated locally)")
    args = parser.parse_args(argv)
    profile = profiles.profile_named(args.framework_version) if args.framework_version else None
    if profile and args.distribution not in profile.distributions:
        parser.error(f"--distribution {args.distribution} does not run in the PyTorch {args.framework_version} "
                     f"container: use one of {list(profile.distributions)}")
    for name in ("queries", "epochs", "instance_count", "processes_per_host"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')}={getattr(args, name)}: use 1 or more")
    if args.source_dir is None and args.entry_point not in ENTRY_POINTS:
        parser.error(f"--entry-point {args.entry_point}: use one of {list(ENTRY_POINTS)}, or name your own folder "
                     "with --source-dir")
    if args.source_dir is not None and not (args.source_dir / args.entry_point).is_file():
        parser.error(f"--entry-point {args.entry_point}: no such file in --source-dir {args.source_dir}")
    hyperparameters = []
    for item in args.hyperparameter:
        name, separator, value = item.partition("=")
        if not separator or not name:
            parser.error(f"--hyperparameter {item!r}: write NAME=VALUE")
        hyperparameters.append((name, value))
    if (args.stall_seconds is None) != (args.stall_check_seconds is None):
        parser.error("--stall-seconds and --stall-check-seconds go together: give both, or neither for the stack's "
                     "stall_minutes and stall_check_minutes")
    watchdog_timing = None
    if args.stall_seconds is not None:
        if args.stall_seconds < 1 or args.stall_check_seconds <= 0:
            parser.error(f"--stall-seconds={args.stall_seconds} --stall-check-seconds={args.stall_check_seconds}: "
                         "use positive numbers")
        watchdog_timing = WatchdogTiming(args.stall_seconds, args.stall_check_seconds)
    tuning_options = None
    if args.tune:
        ranges = []
        for item in args.tune:
            name, separator, spec = item.partition("=")
            if not separator or not name:
                parser.error(f"--tune {item!r}: write NAME=SPEC")
            ranges.append((name, spec))
        try:
            parameter_ranges(tuple(ranges))
        except ValueError as bad:
            parser.error(str(bad))
        max_jobs = args.max_jobs if args.max_jobs is not None or args.strategy == "Grid" else 4
        tuning_options = TuningOptions(ranges=tuple(ranges), strategy=args.strategy, max_jobs=max_jobs,
                                       max_parallel_jobs=args.max_parallel_jobs, objective_metric=args.objective,
                                       objective_type=args.objective_type, random_seed=args.random_seed,
                                       early_stopping=args.early_stopping)
    if args.data and not args.data.is_dir():
        parser.error(f"--data {args.data}: not a folder; give a folder holding rank.train (+ rank.train.query)")
    return DemoOptions(queries=args.queries, epochs=args.epochs, entry_point=args.entry_point,
                       distribution=args.distribution, instance_count=args.instance_count,
                       processes_per_host=args.processes_per_host, data=args.data,
                       work_dir=args.work_dir, framework_version=args.framework_version, source_dir=args.source_dir,
                       hyperparameters=tuple(hyperparameters), metric_definitions=args.metric_definitions,
                       watchdog_timing=watchdog_timing, tuning=tuning_options)


def render_summary(result: DemoResult) -> str:
    ndcg = "n/a" if result.ndcg_at_10 is None else f"{result.ndcg_at_10:.4f} ({result.ndcg_split} queries)"
    package = result.model_package_arn or (f"not registered: {result.not_registered_reason}"
                                           if result.not_registered_reason else "-")
    model = f"{_shown(result.model_dir)}/ (model.tar.gz unpacked)" if result.model_dir else "-"
    lines = [f"job:       {result.job_name}", f"status:    {result.status}",
             f"duration:  {result.duration_seconds:.1f} s", f"NDCG@10:   {ndcg}",
             f"model:     {model}", f"package:   {package}",
             f"plot:      {', '.join(_shown(path) for path in result.plots) or '-'}"]
    if result.metrics:
        lines.append("metrics:   " + " ".join(f"{name}={value:g}" for name, value in sorted(result.metrics.items())))
    if result.failure_reason:
        lines.append(f"reason:    {result.failure_reason}")
    elif result.watchdog_reason:
        lines.append(f"reason:    stopped by the stalled-job watchdog: {result.watchdog_reason}")
    return "\n".join(lines)


def _shown(path: Path) -> str:
    """Relative to the working directory when under it (as `make demo` runs): a path to paste into the next command."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        result = run_demo(parse_options(argv))
    except (TriggerRefused, MissingInterpreter) as refused:
        print(refused)
        return 1
    print(render_tuning_summary(result) if isinstance(result, TuningResult) else render_summary(result))
    return 0 if result.status == "Completed" else 1
