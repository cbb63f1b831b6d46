"""Fixtures for the Slurm tests: a real cluster (tests/slurm/lab.py) per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import require_installed
from tests.slurm.lab import SlurmLab, installed


@pytest.fixture
def slurm_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmLab]:
    """One slurmctld, three slurmd nodes (4 GPUs each) in namespaces of their own, its own
    munged; everything stopped and every namespace removed afterwards, also on failure."""
    require_installed(installed(), "Slurm (slurmctld, slurmd, slurm-client, munge)")
    lab = SlurmLab(tmp_path_factory.mktemp("slurm"))
    lab.start()  # stops what it started when it fails
    try:
        yield lab
    finally:
        lab.stop()
