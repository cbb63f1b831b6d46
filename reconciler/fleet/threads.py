"""Adapter: work on threads that the calling thread waits for without going deaf to signals.

Python runs a signal handler (SIGTERM's, Ctrl-C's) only in the main thread, and only once that
thread runs again: one blocked on a worker without a timeout may not wake when the signal is
delivered to another thread, and then the handler — which tells the workers to stop — never
runs. So the caller waits in short slices, and when it leaves (results, or an exception such
as KeyboardInterrupt) it tells the workers to stop, cancels what has not started, and waits
only for the running ones, which check `stop` between steps.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import TypeVar

In = TypeVar("In")
Out = TypeVar("Out")

WAKE = 0.2  # seconds between the caller's wake-ups: how late a signal handler may run


def run_all(
    work: Callable[[In], Out],
    items: Iterable[In],
    workers: int,
    stop: Callable[[], None] = lambda: None,
) -> list[Out]:
    """`work` over `items` on at most `workers` threads, results in order; `stop` is called
    whenever the caller leaves, before the running items are waited for."""
    pool = ThreadPoolExecutor(max_workers=max(1, workers))
    try:
        futures = [pool.submit(work, item) for item in items]
        while wait(futures, timeout=WAKE).not_done:
            continue  # woke: a pending signal handler has run; wait again
        return [future.result() for future in futures]
    finally:
        stop()
        pool.shutdown(wait=True, cancel_futures=True)


def run_grouped(
    work: Callable[[In], Out],
    items: Sequence[In],
    group: Callable[[In], str],
    workers: Callable[[str], int],
    stop: Callable[[], None] = lambda: None,
) -> list[Out]:
    """`work` over `items`, results in order: the items of one group (`group(item)`, e.g. a
    fleet) on at most `workers(group)` threads, the groups side by side, so a group whose
    items are slow never holds another's. `stop` as in run_all, for the caller's wait."""
    members: dict[str, list[int]] = {}
    for index, item in enumerate(items):
        members.setdefault(group(item), []).append(index)

    def one_group(name: str) -> list[Out]:
        mine = [items[index] for index in members[name]]
        return run_all(work, mine, min(workers(name), len(mine)))

    names = list(members)
    by_index: dict[int, Out] = {}
    for name, found in zip(names, run_all(one_group, names, len(names), stop), strict=True):
        by_index.update(zip(members[name], found, strict=True))
    return [by_index[index] for index in range(len(items))]
