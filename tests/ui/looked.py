"""What the page tests look at: this project's denv files in a git repository, the release
reconciled onto the local fleet (simulated GPUs) by `denv reconcile --once`, and one look by
the UI's own gathering; the agent's units are stopped afterwards."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

from reconciler.fleet.hostagent import AgentClient
from reconciler.fleet.transport import LocalTransport
from reconciler.ui.state import Gather, Refresher, UiState
from tests.labs.workspace import copy_denv_files
from tests.reconcile.conftest import GitRepo


def agent(home: Path) -> AgentClient:
    return AgentClient(
        LocalTransport(env={**os.environ, "DENV_HOME": str(home)}), python=sys.executable
    )


def reconcile(repo: Path, cache: Path, home: Path) -> None:
    env = {**os.environ, "DENV_CACHE": str(cache), "DENV_HOME": str(home)}
    command = ["reconcile", "--once", "--ready-timeout", "60s", "--repo", str(repo)]
    done = subprocess.run(
        [sys.executable, "-m", "reconciler", *command],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def look(repo: Path, cache: Path) -> UiState:
    """One look as `denv ui` takes it (DENV_HOME: the caller's)."""
    state = UiState(refresh=60)
    gather = Gather(str(repo), cache)
    try:
        Refresher(state, gather).once()
    finally:
        gather.close()
    assert state.error is None
    return state


def stop_units(home: Path) -> None:
    client = agent(home)
    for unit in client.units():
        client.stop(unit.id, grace=2)


@contextmanager
def reconciled(
    factory: pytest.TempPathFactory, env: Mapping[str, str] | None = None
) -> Iterator[tuple[GitRepo, Path]]:
    """This project's denv files in a git repository, chat-8b reconciled onto the local fleet
    by an agent of a home of its own: (repository, home). DENV_HOME (and `env`) are set for
    the block; the agent's units are stopped at its end, whatever happened."""
    repo = GitRepo(copy_denv_files(factory.mktemp("repo")), factory.mktemp("cache"))
    repo.commit("initial")
    home = factory.mktemp("home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DENV_HOME", str(home))
        for name, value in (env or {}).items():
            patch.setenv(name, value)
        try:
            reconcile(repo.path, repo.cache, home)
            yield repo, home
        finally:
            stop_units(home)
