"""One LETOR file parsed by several worker processes, each on its own byte range of whole lines, writing straight
into one set of output arrays in a shared file (no rows are pickled between processes).

Threads cannot do this: the per-chunk numpy calls are many and short, and the interpreter lock between them keeps
threads to about one core. Each worker memory-maps the text, parses its range with ranker.data.letor_parser, reports the
range's shape (rows, widest index, qid or not), and once the parent has placed every range, writes its rows at its
own offset into the shared arrays. Where any range is not plain LETOR (ranker.data.letor_parser hands such text to
scikit-learn), the result is None, as from `letor_parser.parse`.

Workers start with `fork` while this process has not initialised CUDA (fast: nothing is imported again), and with
`forkserver` once it has (a forked child of a CUDA process must not touch CUDA; the workers do not, but a fresh
process is the documented rule).

`parse_ahead` starts a file's workers early, before the entry point imports torch (ranker.training.early_parse): they
parse while this process imports, and this process's next `parse_file` of that file collects their rows.
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import multiprocessing
import os
import shutil
import sys
import tempfile
import time
import traceback
from multiprocessing.connection import Connection, wait
from pathlib import Path

import numpy as np

from ranker.data import letor_parser
from ranker.data.letor_parser import ParsedRows, RowsShape

# Below this much text per worker, starting processes costs more than it saves.
MIN_BYTES_PER_PROCESS = 32 << 20
# mallopt(3) parameters.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
# How long the parent waits for a worker's next message before it calls the worker lost.
WORKER_TIMEOUT_S = 1800.0
# The niceness of workers started ahead (`parse_ahead`): the parent's imports, which the job waits for as much as for
# the parse, keep a core of their own however many workers there are.
AHEAD_NICENESS = 10


class WorkerFailed(RuntimeError):
    """A worker process raised or died; the message names the file and the lines of its range."""


def parse_file(path: Path, num_features: int | None = None, processes: int | None = None) -> ParsedRows | None:
    """The rows of the LETOR file at `path` parsed by up to `processes` worker processes (default: the cores of this
    process's CPU set; one per MIN_BYTES_PER_PROCESS at most, and in this process for a smaller file), or None where
    scikit-learn's reader must decide. A parse of the file started by `parse_ahead` is collected instead."""
    path = Path(path)
    pending = _taken_ahead(path)
    if pending is None:
        size = path.stat().st_size
        if size < MIN_BYTES_PER_PROCESS:
            with path.open("rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as text:
                return letor_parser.parse(text, num_features)
        pending = PendingParse(path, _worker_count(size, processes))
    return pending.result(num_features)


def parse_ahead(path: Path) -> None:
    """Starts parsing the file at `path` in worker processes now (a file that `parse_file` would parse in this process
    is left for it), for this process's next `parse_file` of it to collect."""
    path = Path(path)
    size = path.stat().st_size
    if size >= MIN_BYTES_PER_PROCESS:
        _STARTED_AHEAD[path.resolve()] = PendingParse(path, _worker_count(size), niceness=AHEAD_NICENESS)


def _worker_count(size: int, processes: int | None = None) -> int:
    return max(1, min(processes or letor_parser.available_cores(), size // MIN_BYTES_PER_PROCESS))


def parsing_since(path: Path) -> float | None:
    """When (`time.perf_counter`) the parse of `path` that `parse_ahead` started began; None without one."""
    pending = _STARTED_AHEAD.get(Path(path).resolve())
    return pending.started if pending is not None else None


def _taken_ahead(path: Path) -> PendingParse | None:
    """The parse `parse_ahead` started for `path`, if this process started it and the file has not changed since."""
    pending = _STARTED_AHEAD.pop(path.resolve(), None)
    if pending is None or pending.owner != os.getpid():
        return None  # none, or a forked child's copy of its parent's: the workers are the parent's to end
    if pending.is_current():
        return pending
    pending.abandon()
    return None


def line_ranges(text: bytes | mmap.mmap, parts: int) -> list[tuple[int, int]]:
    """About equal byte ranges of `text`, each starting at a line's start; a range may be empty."""
    cuts = [0]
    for part in range(1, parts):
        cut = max(cuts[-1], len(text) * part // parts)
        cuts.append(text.find(b"\n", max(cut - 1, 0)) + 1 or len(text) if cut else 0)
    cuts.append(len(text))
    return list(zip(cuts[:-1], cuts[1:]))


def _start_method() -> str:
    torch = sys.modules.get("torch")
    cuda_initialised = torch is not None and torch.cuda.is_initialized()
    return "forkserver" if cuda_initialised or "fork" not in multiprocessing.get_all_start_methods() else "fork"


class PendingParse:
    """A file's parse under way: one worker process per byte range of whole lines, each parsing its range from the
    moment it starts; `result` waits for them, places their rows and has them write those into the output arrays."""

    def __init__(self, path: Path, processes: int, niceness: int = 0):
        self.path, self.started, self.owner = path, time.perf_counter(), os.getpid()
        stat = path.stat()
        self.version = (stat.st_size, stat.st_mtime_ns)
        with path.open("rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as text:
            ranges = line_ranges(text, processes)
        context = multiprocessing.get_context(_start_method())
        self.workers, self.connections = [], []
        try:
            for start, end in ranges:
                ours, theirs = context.Pipe()
                worker = context.Process(target=_work, args=(str(path), start, end, theirs, niceness), daemon=True,
                                         name=f"letor-parser-{len(self.workers)}")
                worker.start()
                theirs.close()
                self.workers.append(worker)
                self.connections.append(ours)
        except BaseException:
            self.abandon()
            raise

    def is_current(self) -> bool:
        """The file is as it was when the workers started reading it."""
        stat = self.path.stat()
        return self.version == (stat.st_size, stat.st_mtime_ns)

    def result(self, num_features: int | None) -> ParsedRows | None:
        """The file's rows, `num_features` columns wide when given, or None where scikit-learn's reader must decide."""
        shared = None
        try:
            shapes = [_receive(connection, worker, self.path)
                      for connection, worker in zip(self.connections, self.workers)]
            shape = RowsShape.of(shapes, num_features)
            if shape is None:
                return None
            shared = _shared_file(self.path, shape)
            rows = _map_rows(shared, shape)
            first_rows = np.cumsum([0] + [piece.rows for piece in shapes])
            for connection, first_row in zip(self.connections, first_rows[:-1].tolist()):
                connection.send((shared, shape, first_row))
            for connection, worker in zip(self.connections, self.workers):
                _receive(connection, worker, self.path)
            return rows
        finally:
            self.abandon()
            if shared is not None:
                os.unlink(shared)  # the parent's map keeps the pages for as long as the arrays live

    def abandon(self) -> None:
        """Ends the workers: a worker still waiting for its orders exits, one that does not is stopped."""
        for connection in self.connections:
            with contextlib.suppress(OSError):  # a worker that has finished or died has closed its end
                connection.send(None)  # (forked workers hold copies of the parent's pipe ends, so closing ours
                # alone would not wake them)
            connection.close()
        for worker in self.workers:
            worker.join(timeout=5)
            if worker.is_alive():
                worker.terminate()
                worker.join()
        self.workers, self.connections = [], []


_STARTED_AHEAD: dict[Path, PendingParse] = {}


def _receive(connection: Connection, worker, path: Path):
    """The worker's next message; WorkerFailed if it reports an error, dies or goes silent."""
    try:
        if not wait([connection, worker.sentinel], timeout=WORKER_TIMEOUT_S) or not connection.poll():
            raise EOFError
        kind, message = connection.recv()
    except EOFError:
        worker.join(timeout=1)
        what = f"sent nothing for {WORKER_TIMEOUT_S:.0f}s" if worker.exitcode is None else \
            f"exited ({worker.exitcode}) before reporting"
        raise WorkerFailed(f"{path}: parser worker {worker.name} {what}; see its output above (a worker killed for "
                           "memory is the usual cause: give the job more memory)") from None
    if kind == "error":
        raise WorkerFailed(message)
    return message


def _offsets(shape: RowsShape) -> tuple[int, int, int, int]:
    """Byte offsets of labels (float64), qids (int64) and features (float32) in the shared file, and its size."""
    features_at = 16 * shape.rows
    return 0, 8 * shape.rows, features_at, features_at + 4 * shape.rows * shape.columns


def _shared_file(path: Path, shape: RowsShape) -> str:
    """A file for the output arrays: in shared memory (/dev/shm) when it has room, else in the temporary folder."""
    size = _offsets(shape)[-1]
    folder = "/dev/shm" if os.path.isdir("/dev/shm") and shutil.disk_usage("/dev/shm").free > 2 * size \
        else tempfile.gettempdir()
    handle, name = tempfile.mkstemp(prefix=f"letor-{path.name}-", dir=folder)
    try:
        os.ftruncate(handle, max(size, 1))
    finally:
        os.close(handle)
    return name


def _map_rows(name: str, shape: RowsShape) -> ParsedRows:
    labels_at, qids_at, features_at, _ = _offsets(shape)
    if shape.rows == 0:
        return ParsedRows(np.zeros((0, shape.columns), np.float32), np.zeros(0), np.zeros(0, np.int64)
                          if shape.with_qid else None)
    features = np.memmap(name, np.float32, "r+", features_at, (shape.rows, shape.columns)).view(np.ndarray)
    labels = np.memmap(name, np.float64, "r+", labels_at, (shape.rows,)).view(np.ndarray)
    qids = np.memmap(name, np.int64, "r+", qids_at, (shape.rows,)).view(np.ndarray) if shape.with_qid else None
    return ParsedRows(features, labels, qids)


def _keep_freed_memory() -> None:
    """Has glibc's allocator keep freed blocks of up to 32 MB for reuse. By default it hands each of a chunk's large
    temporaries back to the kernel when freed and takes new zeroed pages for the next chunk: half of a parse's time
    went to those page faults. Set only in the workers, which exit after one parse."""
    libc = ctypes.CDLL(None)
    mallopt = getattr(libc, "mallopt", None)  # glibc only; elsewhere the default stands
    if mallopt is not None:
        mallopt(_M_MMAP_THRESHOLD, 32 << 20)  # the largest value glibc accepts on 64-bit
        mallopt(_M_TRIM_THRESHOLD, 1 << 30)


def _work(path: str, start: int, end: int, connection: Connection, niceness: int = 0) -> None:
    """A worker: parse text[start:end], send its shape, then write its rows where the parent says."""
    os.nice(niceness)
    _keep_freed_memory()
    try:
        with open(path, "rb") as handle:
            # Not closed here: an error's traceback may still hold views of it; the process's exit unmaps it.
            text = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        parts = letor_parser.parse_lines(text, start, end)
        connection.send(("shape", RowsShape.of_parts(parts) if parts is not None else None))
        if parts is None:
            return
        orders = connection.recv()
        if orders is None:
            return  # the parent gave up (another range is not plain LETOR, or a worker failed): nothing to write
        name, shape, first_row = orders
        letor_parser.fill(parts, _map_rows(name, shape), first_row=first_row)
        connection.send(("done", None))
    except Exception as error:  # noqa: BLE001 - any failure goes to the parent, named by the lines it hit
        with open(path, "rb") as handle:
            first_line = handle.read(start).count(b"\n") + 1
            last_line = first_line + handle.read(end - start).count(b"\n")
        connection.send(("error", f"{path}: lines {first_line}-{last_line}: the parser worker failed: "
                                  f"{type(error).__name__}: {error}\n{traceback.format_exc()}"))
    finally:
        connection.close()
