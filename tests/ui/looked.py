"""What the page tests look at: this project's denv files in a git repository, the release
reconciled onto the local fleet (simulated GPUs) by `denv reconcile --once`, and one look by
the UI's own gathering; the agent's units are stopped afterwards."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from reconciler.fleet.hostagent import AgentClient
from reconciler.fleet.transport import LocalTransport
from reconciler.ui.state import Gather, Refresher, UiState


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
