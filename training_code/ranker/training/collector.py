"""Python's cyclic garbage collector around an entry point's imports, and at its end.

An entry point's imports (torch; Lightning, which brings torchmetrics and, through it, whatever optional domains it
finds installed, torchvision and transformers in the AWS containers) create hundreds of thousands of objects that live
as long as the process. Each collection that runs while they are being created walks every one made so far: paused,
`import lightning` takes 4.5-5.0 s instead of 5.7-6.7 s of CPU on a 2-core host. Frozen afterwards, they are left out
of every later collection.

This module imports nothing beyond the standard library: the entry points import it before torch.
"""

from __future__ import annotations

import gc


def pause() -> None:
    """Before the entry point's heavy imports (after the parse that early_parse starts has forked its workers, which
    keep collecting)."""
    gc.disable()


def freeze_imports() -> None:
    """After the imports: everything that exists now lives as long as the process; collect only what comes after."""
    gc.freeze()
    gc.enable()


def thaw() -> None:
    """At the end of the entry point's `main`, success or failure: what was frozen goes back to the collector, for a
    caller that goes on in this process (a test, a user's own driver) and for the interpreter's teardown, whose last
    collection then frees it (Triton's bindings, which Lightning loads through torch._dynamo, print each of their
    objects still frozen in a reference cycle at exit as a leak). A run that succeeded skips the teardown
    (ranker.training.fast_exit)."""
    gc.unfreeze()
