"""How an entry point's process ends once its run has succeeded: as Python's own exit ends it, less the teardown.

After a run, Python's teardown frees one by one the objects that torch's and Lightning's imports made (about 900,000
with Lightning on a GPU host), collecting garbage over them as it clears each module: 2.1-2.4 s of a Lightning job's
end on an H200 host (0.7-0.8 s with `leave`, counted from the run's last line), 2.3 s of CPU after `import lightning`
on a 2-core host, 0.8 s after `import torch` (docs/benchmarks.md, "How a finished run leaves"). A finished run needs
none of it: its artifacts are written and closed and its process group is left. What the teardown would still do for
others happens here first: the threads that keep a process alive are waited for, every atexit handler runs (logging's
flush, multiprocessing's children, a user's own), and every file still open is flushed.

A run that raises exits as Python exits, with its traceback and status: a failure, and Lightning's stop on SIGTERM (a
SystemExit). So does a process that loaded an MPI library: it finalizes MPI in the teardown, and mpirun fails a job
whose rank skipped that.

This module imports nothing beyond the standard library.
"""

from __future__ import annotations

import atexit
import gc
import io
import os
import sys
import threading
from typing import NoReturn

# Packages whose import can initialise MPI (mpi4py; SageMaker's data parallel library under mpirun).
MPI_PACKAGES = ("mpi4py", "smdistributed")


def leave() -> NoReturn:
    """Ends this process with status 0 after its run succeeded (call from an entry point's `__main__` block, never
    from code that a caller goes on after)."""
    if any(package in sys.modules for package in MPI_PACKAGES):
        sys.exit(0)
    for thread in threading.enumerate():
        if not thread.daemon and thread is not threading.current_thread():
            thread.join()
    atexit._run_exitfuncs()  # the handlers os._exit would skip, as the interpreter runs them at exit
    flush_open_files()
    os._exit(0)


def flush_open_files() -> None:
    """What the teardown's finalizers would write: the buffered output of every file object still open (the standard
    streams first)."""
    for stream in (sys.stdout, sys.stderr):
        if stream is not None and not stream.closed:
            stream.flush()
    # By type, each type asked once: isinstance would read every object's __class__, which some objects compute (and
    # warn in doing so), and a million checks take a CPU host half a second.
    is_file_type: dict[type, bool] = {}
    for candidate in gc.get_objects():
        kind = type(candidate)
        if kind not in is_file_type:
            is_file_type[kind] = issubclass(kind, io.IOBase)
        if not is_file_type[kind]:
            continue
        try:
            if not candidate.closed and candidate.writable():
                candidate.flush()
        except (OSError, ValueError):
            continue  # a pipe whose reader left, a stream detached from its buffer: nothing left to write
