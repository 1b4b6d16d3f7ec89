"""Allocation helpers for the hot loops that build many small objects."""

from __future__ import annotations

import contextlib
import gc
from typing import Iterator


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while building many small acyclic objects.

    Allocating ~10^5 tuples otherwise triggers repeated generation scans that cost more
    than the allocations themselves; nothing built inside may form a reference cycle.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
