"""Python's cyclic garbage collector around an entry point's imports, and at its end.

An entry point's imports (torch; Lightning, which brings torchmetrics and, through it, whatever optional domains it
finds installed, torchvision and transformers in the AWS containers) create hundreds of thousands of objects that live
as long as the process. Each collection that runs while they are being created walks every one made so far: paused,
`import lightning` takes 4.5-5.0 s instead of 5.7-6.7 s of CPU on a 2-core host. Frozen afterwards, they are left out
of every later collection, the interpreter's last ones at exit included.

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
    """At the end of a run that imported Triton (Lightning does, through torch._dynamo): the interpreter's last
    collection at exit then frees the frozen objects too. Triton's bindings count their objects at exit and print each
    one left in a reference cycle as a leak."""
    gc.unfreeze()


def leave_to_exit() -> None:
    """At the end of a run that succeeded: nothing is left to collect early. What the run created since the freeze
    (torch._dynamo's and torch.export's modules above all) would be walked by each collection the interpreter's
    teardown sets off: a third of a second of a CPU host's exit. Its final collection still runs, so everything is
    still freed."""
    gc.disable()
