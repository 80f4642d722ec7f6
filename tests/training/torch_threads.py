"""Torch's intra-op thread count, set for a block and given back to the caller after it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def cpu_threads(count: int) -> Iterator[None]:
    """`with cpu_threads(1):` torch computes on `count` threads; the caller's count is back afterwards, raised or not."""
    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
