"""Fixtures for the Slurm tests: a real cluster (tests/slurm/lab.py) per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import require_installed
from tests.reconcile.conftest import GitRepo, git_repo
from tests.slurm.fleetlab import SlurmFleet, fleet_file
from tests.slurm.lab import SlurmLab, installed

__all__ = ["git_repo"]


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


@pytest.fixture
def slurm_fleet(slurm_lab: SlurmLab, git_repo: GitRepo, tmp_path: Path) -> Iterator[SlurmFleet]:
    """Fleet `hpc` on the lab (tests/slurm/fleetlab.py) in a repository of denv's files;
    every job cancelled and every router stopped afterwards."""
    git_repo.write("fleets/hpc.yaml", fleet_file(slurm_lab))
    found = SlurmFleet(git_repo, slurm_lab, tmp_path / "cache")
    try:
        yield found
    finally:
        found.stop_all()
