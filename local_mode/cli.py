"""`python -m local_mode [options]` (`make demo ARGS="..."`): the whole pipeline on this machine."""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from local_mode.container.container_entrypoint import ContainerUnavailable
from local_mode.container.container_envs import MissingInterpreter
from local_mode.aws.mlflow_server import run_page
from local_mode.demo import DemoOptions, DemoResult, TriggerRefused, profiles, run_demo
from local_mode.job_summary import MlflowRunSummary, shown
from local_mode.aws.synthesized_app import PROJECT_ROOT
from local_mode.tuning_demo import TuningResult, section_range
from local_mode.aws.watchdog_schedule import WatchdogTiming

ENTRY_POINTS = ("train_lightning.py", "train_ddp.py")
MLFLOW_UI_ADDRESS = "http://127.0.0.1:5000"  # where `mlflow ui` serves by default
# The tuning options, each the `tuning` section's key it sets.
TUNING_SECTION_KEYS = {"objective": "objective_metric", "objective_type": "objective_type", "strategy": "strategy",
                       "max_jobs": "max_jobs", "max_parallel_jobs": "max_parallel_jobs",
                       "early_stopping": "early_stopping", "random_seed": "random_seed"}


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
    parser.add_argument("--launch", choices=profiles.LAUNCHES, default=defaults.launch,
                        help="what starts the script in the container: the training toolkit (the stack's default), or "
                             "SDK v3 ModelTrainer's drivers (none, torch_distributed; one process per host here); "
                             "docs/trigger.md#launch")
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
    parser.add_argument("--track", action="store_true",
                        help="track experiments: run MLflow's tracking server (its store in WORK_DIR/mlflow/) and a "
                             "stack whose jobs log to it, as with mlflow_resource_arn (docs/experiment-tracking.md)")
    parser.add_argument("--stall-seconds", type=int, default=None,
                        help="the stalled-job watchdog stops a job whose hosts have all been silent this long (the "
                             "stack's stall_minutes, in seconds); with --stall-check-seconds")
    parser.add_argument("--stall-check-seconds", type=float, default=None,
                        help="how often the watchdog looks (the stack's stall_check_minutes, in seconds)")
    tuning = parser.add_argument_group(
        "tuning", "run a hyperparameter tuning job over the job: the options become the manifest's `tuning` section, "
                  "which the trigger checks and turns into the tuning job; an option left out takes the stack's "
                  "default (docs/tuning.md)")
    tuning.add_argument("--tune", action="append", default=[], metavar="NAME=SPEC",
                        help="a tuned hyperparameter (repeatable): NAME=continuous:MIN:MAX[:log], "
                             "NAME=integer:MIN:MAX[:log] or NAME=categorical:A,B,...")
    tuning.add_argument("--strategy", help="Bayesian, Random, Hyperband or Grid (Bayesian and Hyperband run as "
                                           "Random locally)")
    tuning.add_argument("--max-jobs", type=int, help="trials to run (for Grid: its number of combinations)")
    tuning.add_argument("--max-parallel-jobs", type=int, help="trials running at once")
    tuning.add_argument("--objective", help="the metric definition to optimise (the project's entry points: "
                                            "val_ndcg@10)")
    tuning.add_argument("--objective-type", help="Maximize or Minimize")
    tuning.add_argument("--random-seed", type=int, help="makes the trials' draws reproducible")
    tuning.add_argument("--early-stopping", help="Off or Auto (not emulated locally)")
    args = parser.parse_args(argv)
    profile = profiles.profile_named(args.framework_version) if args.framework_version else None
    if profile and args.distribution not in profile.distributions:
        parser.error(f"--distribution {args.distribution} does not run in the PyTorch {args.framework_version} "
                     f"container: use one of {list(profile.distributions)}")
    for name in ("queries", "epochs", "instance_count", "processes_per_host"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')}={getattr(args, name)}: use 1 or more")
    if args.launch == profiles.MODEL_TRAINER_LAUNCH and args.processes_per_host > 1:
        parser.error(f"--processes-per-host {args.processes_per_host} with --launch {args.launch}: ModelTrainer's "
                     "drivers start one process per GPU of the host, and local hosts have none, so one each; use "
                     "--instance-count for more ranks, or --launch toolkit")
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
    given = {option: getattr(args, option) for option in TUNING_SECTION_KEYS if getattr(args, option) is not None}
    if given and not args.tune:
        parser.error(f"{', '.join('--' + option.replace('_', '-') for option in given)}: these shape a tuning job; "
                     "name what it tunes with --tune NAME=SPEC")
    tuning_section = {**{TUNING_SECTION_KEYS[option]: value for option, value in given.items()},
                      "ranges": _tuned_ranges(parser, args.tune)} if args.tune else None
    if args.data and not args.data.is_dir():
        parser.error(f"--data {args.data}: not a folder; give a folder holding rank.train (+ rank.train.query)")
    return DemoOptions(queries=args.queries, epochs=args.epochs, entry_point=args.entry_point,
                       distribution=args.distribution, launch=args.launch, instance_count=args.instance_count,
                       processes_per_host=args.processes_per_host, data=args.data,
                       work_dir=args.work_dir, framework_version=args.framework_version, source_dir=args.source_dir,
                       hyperparameters=tuple(hyperparameters), metric_definitions=args.metric_definitions,
                       watchdog_timing=watchdog_timing, tuning=tuning_section, track=args.track)


def _tuned_ranges(parser: argparse.ArgumentParser, tune: list[str]) -> dict[str, dict]:
    """The section's `ranges` from `--tune NAME=SPEC` options."""
    ranges: dict[str, dict] = {}
    for item in tune:
        name, separator, spec = item.partition("=")
        if not separator or not name:
            parser.error(f"--tune {item!r}: write NAME=SPEC")
        if name in ranges:
            parser.error(f"--tune {item!r}: {name} is tuned twice; give each hyperparameter one range")
        try:
            ranges[name] = section_range(spec)
        except ValueError as bad:
            parser.error(f"--tune {item}: {bad}")
    return ranges


def render_summary(result: DemoResult) -> str:
    lines = [("job", result.job_name), ("status", result.status), ("duration", f"{result.duration_seconds:.1f} s")]
    # A script of the user's own reports its own metrics, in the `metrics:` line.
    if result.ndcg_at_10 is not None:
        lines.append(("NDCG@10", f"{result.ndcg_at_10:.4f} ({result.ndcg_split} queries)"))
    package = result.model_package_arn or (f"not registered: {result.not_registered_reason}"
                                           if result.not_registered_reason else "-")
    metrics = (" ".join(f"{name}={value:g}" for name, value in sorted(result.metrics.items())) or
               "none (no line of the job's log matched its metric definitions: name yours with --metric-definitions)")
    lines += [("model", _model_line(result)), ("package", package), ("plot", _plot_line(result)),
              ("metrics", metrics), *_mlflow_lines(result.mlflow_run)]
    if result.failure_reason:
        lines.append(("reason", result.failure_reason))
    elif result.watchdog_reason:
        lines.append(("reason", f"stopped by the stalled-job watchdog: {result.watchdog_reason}"))
    lines += _next_line(result)
    return _aligned(lines, width=11)


def render_tuning_summary(result: TuningResult) -> str:
    names = sorted({name for row in result.trials for name in row.hyperparameters})
    header = ["trial", *names, "objective", "status"]
    rows = [[row.name, *(row.hyperparameters.get(name, "") for name in names),
             "-" if row.objective is None else f"{row.objective:.4f}", row.status] for row in result.trials]
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows)]
    table = [" | ".join(str(cell).ljust(width) for cell, width in zip(line, widths)) for line in [header, *rows]]
    table.insert(1, "-+-".join("-" * width for width in widths))
    best = "-" if result.best_job is None else f"{result.best_job} ({result.best_objective:.4f})"
    package = result.model_package_arn or f"not registered: {result.not_registered_reason or '-'}"
    head = [("tuning job", result.tuning_job_name), ("status", result.status), ("strategy", result.strategy),
            ("objective", result.objective)]
    tail = [("best", best)]
    if result.best_trial:  # unpacked as a single job is
        tail += [("model", _model_line(result.best_trial)), ("plot", _plot_line(result.best_trial))]
    tail.append(("package", package))
    tail += [("local mode", note) for note in result.notes]
    if result.failure_reason:
        tail.append(("reason", result.failure_reason))
    if result.best_trial:
        tail += _next_line(result.best_trial)
    return "\n".join([_aligned(head, width=12), "", *table, "", _aligned(tail, width=12)])


def _aligned(lines: list[tuple[str, str]], *, width: int) -> str:
    return "\n".join(f"{label + ':':<{width}}{value}" for label, value in lines)


def _mlflow_lines(run: MlflowRunSummary | None) -> list[tuple[str, str]]:
    """A tracked job's run, and how to browse it once the demo's server has stopped: MLflow's UI on its store."""
    if run is None:
        return []
    store = shown(run.store)
    if run.run_id is None or run.experiment_id is None:
        return [("mlflow", f"no run: the job logged none to experiment {run.experiment_name} ({store})")]
    browse = [shown(Path(sys.executable)), "-m", "mlflow", "ui", "--backend-store-uri", f"sqlite:///{store}"]
    return [("mlflow", f"run {run.run_id} in experiment {run.experiment_name} ({store})"),
            ("browse", f"{shlex.join(browse)}, then {run_page(MLFLOW_UI_ADDRESS, run.experiment_id, run.run_id)}")]


def _model_line(result: DemoResult) -> str:
    return f"{shown(result.model_dir)}/ (model.tar.gz unpacked)" if result.model_dir else "-"


def _plot_line(result: DemoResult) -> str:
    return ", ".join(shown(path) for path in result.plots) or "-"


def _next_line(result: DemoResult) -> list[tuple[str, str]]:
    """For a completed model of the project's entry points, the command that scores rows with it (docs/scoring.md),
    runnable as printed from where the demo ran: the training code on the path, this Python (the project's
    environment), the scores written beside the unpacked model."""
    if result.status != "Completed" or result.model_dir is None or result.scoring_input is None:
        return []
    command = [shown(Path(sys.executable)), "-m", "ranker.predict", "--model", shown(result.model_dir),
               "--input", shown(result.scoring_input), "--output", shown(result.model_dir.parent / "scores.tsv")]
    return [("next", f"PYTHONPATH={shlex.quote(shown(PROJECT_ROOT / 'training_code'))} {shlex.join(command)}")]




def main(argv: Sequence[str] | None = None) -> int:
    try:
        result = run_demo(parse_options(argv))
    except (TriggerRefused, MissingInterpreter, ContainerUnavailable) as refused:
        print(refused)
        return 1
    print(render_tuning_summary(result) if isinstance(result, TuningResult) else render_summary(result))
    return 0 if result.status == "Completed" else 1
