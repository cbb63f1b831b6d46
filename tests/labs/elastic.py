"""An elastic chat-8b for the lab tests: its stage's replicas between bounds, scaled by policy
`fast` (written into the test repository's policies/scaling.yaml) — reactive only, a decision
every pass, down one replica a second after the last change, so that a few `denv reconcile
--once` passes scale it up under load and down after it; `held` scales down only after ten
minutes (what is given up at once, pending replicas, is all a test sees go). Each replica
takes at most `max_batch` requests at once: more wait, and waiting asks for another one."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from typing import Any

from tests.labs.operated import Operated
from tests.labs.release import release_yaml, stage
from tests.reconcile.conftest import GitRepo

FAST = """scaling:
  fast:
    interval: 0s
    window: 5s
    predictive: false
    max_waiting_per_replica: 0
    up: { delay: 0s, step: 1 }
    down: { delay: 1s, step: 1, drain_grace: 30s }
  held:
    interval: 0s
    predictive: false
    max_waiting_per_replica: 0
    up: { delay: 0s, step: 1 }
    down: { delay: 10m, step: 1, drain_grace: 30s }
"""
BATCH = 2  # requests a replica runs at once: 8 workers keep some waiting on 3 replicas


def elastic_release(
    repo: GitRepo,
    fleets: str,
    low: int = 1,
    high: int = 3,
    gpus: int = 1,
    policy: str = "fast",
    pool: str = "fleet",
) -> str:
    """chat-8b's canary on `fleets`, replicas between `low` and `high` by `policy` (`pool:
    stage`: the bounds are the stage's, over all its fleets)."""
    repo.write("policies/scaling.yaml", FAST)
    bounds = f"replicas: {{ min: {low}, max: {high}, policy: {policy}, pool: {pool} }}"
    text = release_yaml(stage("canary", fleets, bounds), replicas=low, batch=BATCH, gpus=gpus)
    repo.write("releases/chat-8b/denv.yaml", text)
    return repo.commit(f"chat-8b: elastic, {low} to {high} replicas")


def tolerate_a_short_queue(repo: GitRepo) -> None:
    """Commit `fast` with up to 4 requests waiting a replica: under calm traffic a request
    waits a moment on its replica (longer on a busy machine), which is no reason to ask for
    another one, and the scale-down a test waits for is not undone by it."""
    text = (repo.path / "policies/scaling.yaml").read_text()
    replaced = text.replace("max_waiting_per_replica: 0", "max_waiting_per_replica: 4", 1)
    repo.write("policies/scaling.yaml", replaced)
    repo.commit("scaling: the fast policy tolerates a short queue")


def passes(
    lab: Operated, done: Callable[[], bool], most: int
) -> list[subprocess.CompletedProcess[str]]:
    """`denv reconcile --once` passes until `done()` holds after one, at most `most` of them."""
    found = []
    while len(found) < most:
        found.append(lab.reconcile())
        if done():
            return found
    raise AssertionError("\n".join(p.stdout + p.stderr for p in found))


def decisions(runs: list[subprocess.CompletedProcess[str]]) -> list[tuple[int, int]]:
    """The autoscaler's decisions the passes announced (`scale r/s/f: 1 → 2 (why)`), in order."""
    pattern = r"scale \S+: (\d+) → (\d+) \("
    return [
        (int(a), int(b)) for run in runs for a, b in re.findall(pattern, run.stdout + run.stderr)
    ]


def row(status: dict[str, Any], fleet: str) -> dict[str, Any]:
    """The deployment of chat-8b's canary on `fleet` in `denv status --json`."""
    [found] = [d for d in status["deployments"] if d["fleet"] == fleet]
    return found
