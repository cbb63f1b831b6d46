"""End-to-end tests share the reconciler tests' git repository fixture (a repository of
this project's denv files with the bot's identity); the PR walkthrough imports the forge
tests' own instead."""

from tests.reconcile.conftest import git_repo

__all__ = ["git_repo"]
