"""A busy machine: every core kept busy while a test runs (scripts/cpu_hog.sh).

The hogs are counted so that every core has one competitor besides the test, wherever it
runs: under `pytest -n N` the other N-1 workers run tests of their own (one core each), and
under scripts/cpu_hog.sh (`make test-stress`) its hogs already run; what is left gets a hog of
the test's own, at least one when nothing else hogs the machine. The hogs and the command they
wait on share one process group, stopped together at the end, whatever the test does."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

from tests.conftest import ROOT


def hog_niceness(workers: int) -> int:
    """Beside other test workers, the hogs take only the CPU those leave idle (niceness 19):
    no core is ever idle, and the workers' own tests are not slowed; alone, they compete."""
    return 19 if workers > 1 else 0


def hogs_wanted(cores: int, workers: int, hogged: int) -> int:
    """Hogs to start on `cores` cores beside `workers` test workers and `hogged` hogs."""
    return max(cores - (workers - 1) - hogged, 0 if hogged else 1)


@contextmanager
def busy_machine() -> Iterator[int]:
    """Keep the machine busy for the `with` block; yields the number of hogs started."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    hogged = int(os.environ.get("CPU_HOG_CORES", "0"))
    hogs = hogs_wanted(os.cpu_count() or 1, workers, hogged)
    if not hogs:
        yield 0
        return
    hog = subprocess.Popen(
        [str(ROOT / "scripts" / "cpu_hog.sh"), "sleep", "7200"],
        start_new_session=True,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "HOG_CORES": str(hogs), "HOG_NICE": str(hog_niceness(workers))},
    )
    try:
        assert hog.stderr is not None
        assert "busy core" in hog.stderr.readline()  # started; running a moment later
        yield hogs
    finally:
        os.killpg(hog.pid, signal.SIGKILL)
        hog.wait()
