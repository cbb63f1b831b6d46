"""A busy machine: every core has a competitor besides the test, wherever the test runs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.engines.sim.sims import wait_until
from tests.labs.busy import busy_machine, hog_niceness, hogs_wanted


@pytest.mark.parametrize(
    ("cores", "workers", "hogged", "hogs"),
    [
        (2, 1, 0, 2),  # alone (the serial phase): a hog a core
        (2, 2, 0, 1),  # beside another xdist worker: it keeps one core busy
        (4, 2, 0, 3),
        (2, 4, 0, 1),  # more workers than cores: still one hog of its own
        (2, 2, 2, 0),  # under scripts/cpu_hog.sh (make test-stress): its hogs are enough
        (4, 1, 2, 2),
    ],
)
def test_hogs_wanted(cores: int, workers: int, hogged: int, hogs: int) -> None:
    assert hogs_wanted(cores, workers, hogged) == hogs


def test_hogs_are_started_only_where_none_run_already(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "1")
    monkeypatch.setenv("CPU_HOG_CORES", "0")
    with busy_machine() as hogs:
        assert hogs == os.cpu_count()
    monkeypatch.setenv("CPU_HOG_CORES", str(os.cpu_count()))
    with busy_machine() as hogs:
        assert hogs == 0


def test_beside_other_workers_the_hogs_take_only_idle_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under `pytest -n N` the hogs run at niceness 19: the cores are never idle, and the other
    workers' tests are not slowed by them; alone (the serial phase) they compete."""
    assert (hog_niceness(1), hog_niceness(3)) == (0, 19)
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "3")
    monkeypatch.setenv("CPU_HOG_CORES", "0")
    monkeypatch.setenv("HOG_MARK", f"test-{os.getpid()}")  # these hogs, not any other's
    mark = f"HOG_MARK=test-{os.getpid()}"
    with busy_machine() as hogs:
        assert hogs >= 1
        # `nice` sets the niceness, then becomes the hog: a hog process seen is already niced
        niceness = wait_until(lambda: _hog_niceness(mark), 30.0, "the hogs to start")
    assert niceness == {19}


def _hog_niceness(mark: str) -> set[int]:
    """The niceness of every hog process carrying `mark`."""
    return {
        os.getpriority(os.PRIO_PROCESS, int(pid))
        for pid in os.listdir("/proc")
        if pid.isdigit() and _is_hog(Path("/proc", pid), mark)
    }


def _is_hog(proc: Path, mark: str) -> bool:
    """A process doing a hog's work (stress-ng, or a shell busy loop) with `mark` in its
    environment."""
    try:
        command = (proc / "cmdline").read_bytes().split(b"\0")
        environment = (proc / "environ").read_bytes().split(b"\0")
    except OSError:
        return False
    # the program itself, not `nice` on its way to becoming it (niceness not yet set)
    program = Path(command[0].decode(errors="replace")).name
    busy = program == "stress-ng" or (program == "sh" and b"while :; do :; done" in command)
    return busy and mark.encode() in environment
