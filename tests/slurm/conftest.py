"""Fixtures for the Slurm tests: a real cluster (tests/labs/slurm.py) per test, and fleet
`hpc` on it (tests/labs/slurm_fleet.py)."""

from __future__ import annotations

from tests.labs.slurm_fleet import slurm_fleet, slurm_lab
from tests.reconcile.conftest import git_repo

__all__ = ["git_repo", "slurm_fleet", "slurm_lab"]  # the fixtures
