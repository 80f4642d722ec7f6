"""How a finished run leaves: the seconds from an entry point's last line to the end of its process, ending through
ranker.training.fast_exit as shipped, against the same script ending through Python's own exit (`fast_exit.leave`
replaced by `sys.exit(0)`, the baseline), measured in the same call, runs of the two alternating.

    python -m benchmarks.cpu.process_exit [--train DIR] [--epochs 1] [--repeats 3]

Each run is the entry point as a job runs it (`python train_*.py`, CPU, one process) on the LETOR sample, with its
shipped defaults but `--epochs`. Table on stdout; section `process-exit` in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

from benchmarks.harness.machine import machine_description
from benchmarks.harness.project_code import LETOR_SAMPLE, TRAINING_CODE
from benchmarks.harness.report import markdown_table, provenance, write_section
from benchmarks.harness.timed_run import run_timed

ENTRY_POINTS = ("train_ddp.py", "train_lightning.py")
# Runs an entry point as `python ENTRY ...` does; "python-exit" ends it through sys.exit(0) where it would leave.
LAUNCHER = """
import runpy, sys
from ranker.training import fast_exit
entry_point, ending = sys.argv[1], sys.argv[2]
if ending == "python-exit":
    fast_exit.leave = lambda: sys.exit(0)
sys.argv = [entry_point, *sys.argv[3:]]
runpy.run_path(entry_point, run_name="__main__")
"""
ENDINGS = {"fast-exit": "fast_exit.leave() (shipped)", "python-exit": "Python's exit (baseline)"}


def timed_run(entry_point: str, ending: str, flags: list[str], log: Path) -> tuple[float, float]:
    """Seconds from launch to the process's end, and from its last output line to its end."""
    lines = run_timed([sys.executable, "-c", LAUNCHER, entry_point, ending, *flags], TRAINING_CODE,
                      {**os.environ, "PYTHONPATH": str(TRAINING_CODE)}, log)
    (last_line, _), (ended, _) = lines[-2:]  # run_timed's last entry is the process's end
    return ended, ended - last_line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", type=Path, default=LETOR_SAMPLE)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--doc", type=Path, default=None, help="default: docs/benchmarks.md")
    args = parser.parse_args()
    if not args.train.exists():
        raise SystemExit(f"--train: {args.train} does not exist; point it at the letor-sample folder "
                         "(or set LETOR_SAMPLE_DIR)")
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for entry_point in ENTRY_POINTS:
            times: dict[str, list[tuple[float, float]]] = {ending: [] for ending in ENDINGS}
            for repeat in range(args.repeats):
                for ending in ENDINGS:
                    out = Path(work) / f"{entry_point}-{ending}-{repeat}"
                    flags = ["--train", str(args.train), "--epochs", str(args.epochs), "--model-dir",
                             str(out / "model"), "--output-data-dir", str(out / "output"), "--checkpoint-dir",
                             str(out / "checkpoints")]
                    times[ending].append(timed_run(entry_point, ending, flags, Path(work) / f"{out.name}.log"))
            for ending, label in ENDINGS.items():
                launch_to_end = statistics.median(total for total, _ in times[ending])
                last_line_to_end = statistics.median(tail for _, tail in times[ending])
                rows.append([entry_point, label, f"{launch_to_end:.2f}", f"{last_line_to_end:.2f}"])
    table = markdown_table(["entry point", "process ends through", "launch to end (s)", "last line to end (s)"], rows)
    print(table)
    body = (f"{provenance(machine_description('cpu'))}\n- Runs: each entry point on {args.train.name} (CPU, one "
            f"process), its shipped defaults but `--epochs {args.epochs}`; medians of {args.repeats} runs per row, the "
            f"two endings alternating\n\n{table}")
    write_section("process-exit", "How a finished run leaves", body, **({"doc": args.doc} if args.doc else {}))


if __name__ == "__main__":
    main()
