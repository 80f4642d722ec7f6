"""How long a rank waits in a collective (all-reduce, barrier, gather) for the other ranks before it gives up, and
what the job's failure reason says when it does.

Without a bound, a rank whose peer is stuck -- deadlocked in its data loader, blocked on a file system, or never past a
SIGTERM -- waits as long as the job may run (`max_runtime`, 24 hours by default) while every instance of the job bills.
`init_process_group()` and the Lightning strategy give the process group `collective_timeout()`:
`$SAGEMAKER_DISTRIBUTED_COLLECTIVE_TIMEOUT` seconds, else 30 minutes.

Why 30 minutes: it is torch's own default for gloo and the one Lightning and Accelerate give NCCL, so jobs already
live within it; it leaves room for what legitimately keeps ranks waiting for one another (rank 0 writing a checkpoint
or the artifacts, an evaluation only rank 0 runs, a slow first step while NCCL builds its communicators), and a hung
job still ends within half an hour instead of at `max_runtime`. Raise it for longer rank-0-only phases.

How each backend enforces it:
- gloo (CPU): the collective raises `RuntimeError: ... Timed out waiting <ms>ms for recv operation to complete` in the
  rank that waited, and `failure_reported` turns that into a reason naming the host and rank that timed out and the
  ranks that never reached the collective (`timeout_report`).
- NCCL (GPU): torch's watchdog thread enforces it. From torch 2.2 on `TORCH_NCCL_ASYNC_ERROR_HANDLING` defaults to 3
  (tear the process down without aborting the communicators) and torchrun sets 1 (abort them, then tear down): the
  process ends on SIGABRT after logging `[Rank N] Watchdog caught collective operation timeout ...`, which names the
  rank in the host's log, and no Python code runs to write the failure file. `TORCH_NCCL_ASYNC_ERROR_HANDLING=0`
  without `TORCH_NCCL_BLOCKING_WAIT=1` turns enforcement off (`warn_if_not_enforced` says so); with
  `TORCH_NCCL_BLOCKING_WAIT=1` the timeout raises in Python as on gloo, at the cost of blocking the CPU on every
  collective.
- smddp: SMDDP's own; the process group is created as SMDDP documents it.
The stack's stalled-job watchdog (docs/reliability.md) stops any job whose logs fall silent, whatever the backend.
"""

from __future__ import annotations

import json
import os
import re
import socket
import time
import warnings
from collections.abc import Mapping
from datetime import timedelta

from sagemaker_distributed.job_environment import COLLECTIVE_TIMEOUT
from sagemaker_distributed.topology import Topology, detect_topology

# Named in the table of variables a job may set, which the trigger and synthesis check every job's environment with.
TIMEOUT_VARIABLE = COLLECTIVE_TIMEOUT.name
DEFAULT_TIMEOUT = timedelta(minutes=30)
# How long a rank that timed out waits for the others to time out too before it names the ranks that did not: ranks
# in lock step enter a collective within about a step of one another.
ROLL_CALL_SECONDS = 5.0
ROLL_CALL_KEY = "sagemaker_distributed/collective-timeout"
# What a timed-out collective raises with, by backend; only these are reported as collective timeouts.
_TIMEOUT_MESSAGES = (
    re.compile(r"Timed out waiting \d+ms for (recv|send) operation"),  # gloo
    re.compile(r"Watchdog caught collective operation timeout"),  # NCCL, where the process survives its watchdog
    re.compile(r"timed out in blocking wait"),  # NCCL with TORCH_NCCL_BLOCKING_WAIT=1
)
_NCCL_ASYNC_ERROR_HANDLING = ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_ASYNC_ERROR_HANDLING")
_NCCL_BLOCKING_WAIT = ("TORCH_NCCL_BLOCKING_WAIT", "NCCL_BLOCKING_WAIT")


def collective_timeout(env: Mapping[str, str] = os.environ) -> timedelta:
    """`$SAGEMAKER_DISTRIBUTED_COLLECTIVE_TIMEOUT` (seconds), else DEFAULT_TIMEOUT."""
    text = env.get(TIMEOUT_VARIABLE, "").strip()
    if not text:
        return DEFAULT_TIMEOUT
    try:
        seconds = float(text)
    except ValueError:
        seconds = float("nan")
    if not seconds > 0 or seconds == float("inf"):
        raise ValueError(f"{TIMEOUT_VARIABLE}={text!r} is not a positive number of seconds: set e.g. 3600, or unset "
                         f"it for the default of {DEFAULT_TIMEOUT.total_seconds():.0f}")
    return timedelta(seconds=seconds)


def _first_set(env: Mapping[str, str], names: tuple[str, ...]) -> str | None:
    return next((env[name].strip() for name in names if env.get(name, "").strip()), None)


def nccl_enforces_timeout(env: Mapping[str, str] = os.environ) -> bool:
    """Whether an NCCL process group of this process will act on its timeout (torch >= 2.2's defaults do)."""
    return _first_set(env, _NCCL_ASYNC_ERROR_HANDLING) != "0" or _first_set(env, _NCCL_BLOCKING_WAIT) == "1"


def warn_if_not_enforced(backend: str, env: Mapping[str, str] = os.environ) -> None:
    if backend == "nccl" and not nccl_enforces_timeout(env):
        warnings.warn(f"TORCH_NCCL_ASYNC_ERROR_HANDLING=0 without TORCH_NCCL_BLOCKING_WAIT=1: NCCL will not enforce "
                      f"the collective timeout ({collective_timeout(env)}), so a rank stuck in a collective waits "
                      f"until the job is stopped; unset it to let torch end the process instead", RuntimeWarning,
                      stacklevel=3)


def is_collective_timeout(error: BaseException) -> bool:
    return isinstance(error, RuntimeError) and any(pattern.search(str(error)) for pattern in _TIMEOUT_MESSAGES)


def timeout_report(error: BaseException, env: Mapping[str, str] = os.environ) -> str:
    """The failure reason for a collective that timed out in this process: which host and rank gave up after how
    long, and which ranks never reached the collective (found by a roll call in the job's rendezvous store)."""
    topology = detect_topology(env)
    waited = collective_timeout(env)
    here = _where(topology.rank, topology, env)
    try:
        absent = absent_ranks(topology, env, min(ROLL_CALL_SECONDS, waited.total_seconds() / 2))
    except Exception as failure:  # the roll call is a courtesy: the timeout is the reason, whatever it finds
        missing = f"the ranks that never reached it are unknown ({type(failure).__name__}: {failure})"
    else:
        missing = (f"{', '.join(_where(rank, topology, env) for rank in absent)} never reached it" if absent else
                   "every rank timed out in it (a network fault rather than a stuck rank)")
    return (f"CollectiveTimeout: {here} waited {waited.total_seconds():g} s ({TIMEOUT_VARIABLE}) in a collective; "
            f"{missing}. {type(error).__name__}: {error}")


def absent_ranks(topology: Topology, env: Mapping[str, str], grace_seconds: float) -> list[int]:
    """Every rank that timed out signs in at the job's rendezvous store (the one torchrun or rank 0 serves at
    MASTER_ADDR:MASTER_PORT); after `grace_seconds` the ranks that did not sign in are the ones that never reached
    the collective, or never waited long enough in it."""
    # Imported here, where a timeout is being reported: the failure reasons that do not need it (a bad flag, refused
    # before the entry point imports torch) load this module without torch.
    import torch.distributed as dist

    store = dist.TCPStore(topology.master_addr, topology.master_port, is_master=False,
                          timeout=timedelta(seconds=grace_seconds + 10))
    # A key of this attempt's own: torchrun's restarts share the store.
    prefix = f"{ROLL_CALL_KEY}/restart-{env.get('TORCHELASTIC_RESTART_COUNT', '0')}/rank-"
    store.add(f"{prefix}{topology.rank}", 1)
    time.sleep(grace_seconds)
    # add(key, 0) reads a counter (0 where no rank signed in); torch 2.2's store has no check().
    return [rank for rank in range(topology.world_size) if store.add(f"{prefix}{rank}", 0) == 0]


def _where(rank: int, topology: Topology, env: Mapping[str, str]) -> str:
    """`rank 1 on algo-2`: SageMaker's toolkit gives each host the node rank of its place in SM_HOSTS, and every host
    runs as many ranks."""
    hosts = json.loads(env.get("SM_HOSTS") or "[]")
    node = rank // topology.local_world_size
    if node < len(hosts):
        return f"rank {rank} on {hosts[node]}"
    if rank == topology.rank:
        return f"rank {rank} on {env.get('SM_CURRENT_HOST') or socket.gethostname()}"
    return f"rank {rank}"
