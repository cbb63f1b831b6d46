"""Python's cyclic garbage collector, paused around work that makes many objects and no
reference cycles that outlive it (loading a repository, resolving the desired state): its
passes over them would free nothing and took a fifth to a half of that work. Whatever cycles
were made are collected once it runs again."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """Nested uses leave the collector to the outermost one."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()
