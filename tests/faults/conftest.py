"""Fault tests share the reconciler tests' git repository fixture."""

from tests.reconcile.conftest import git_repo

__all__ = ["git_repo"]
