"""Fixtures of the PR workflow tests: the forge tests' repository under git and faked GitHub."""

from tests.forge.conftest import git_repo, github

__all__ = ["git_repo", "github"]
