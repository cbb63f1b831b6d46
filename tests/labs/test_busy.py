"""A busy machine: every core has a competitor besides the test, wherever the test runs."""

from __future__ import annotations

import os

import pytest

from tests.labs.busy import busy_machine, hogs_wanted


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
