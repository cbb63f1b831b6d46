"""Adapter: a running trial's heartbeat. Its worker stamps the trial (user attribute
`alive_at`, Unix time) every HEARTBEAT_S while the trial runs, so that workers sharing the
study tell a trial whose worker died (no stamp for STALE_S) from one still running; `Study.ask`
fails such a trial, and its candidate can be picked again. optuna's own heartbeat runs only
inside `study.optimize`, which denv's ask-and-tell loop does not use."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Protocol

HEARTBEAT_S = 30.0
STALE_S = 300.0  # ten missed beats: a worker that is gone, not a slow database
ALIVE = "alive_at"

log = logging.getLogger(__name__)


class Stampable(Protocol):
    def set_user_attr(self, key: str, value: object) -> None: ...


@contextlib.contextmanager
def beating(
    trial: Stampable, every: float = HEARTBEAT_S, clock: Callable[[], float] = time.time
) -> Iterator[None]:
    """Stamp `trial` now and every `every` seconds until the block ends."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.is_set():
            try:
                trial.set_user_attr(ALIVE, clock())
            except Exception as exc:  # the trial was told meanwhile, or the database hiccups
                if stop.is_set():
                    return
                log.warning("trial heartbeat not recorded: %s", exc)
            stop.wait(every)

    thread = threading.Thread(target=beat, name="trial-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=30)


def stale(alive_at: object, now: float, limit: float = STALE_S) -> bool:
    """Whether a running trial stamped at `alive_at` has missed its beats (a trial never
    stamped, from an older denv, is never judged stale)."""
    return isinstance(alive_at, int | float) and now - float(alive_at) > limit
