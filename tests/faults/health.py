"""A staged release on a local fleet of simulated GPUs, for the faults of health at the
moment of decision: `denv reconcile --once` passes as the bot runs them, the rollout's state
read from the bot's lease note, and faults set on an engine through the simulator's API."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reconciler.fleet.model.observed import UnitRecord
from tests.labs.elastic_local import FLEET, ElasticLab, elastic_lab
from tests.reconcile.conftest import GitRepo

# The only alarm the stages name: a latency they never reach.
ALARMS = (
    "alarms:\n  ttft-slow: { metric: ttft, stat: p99, max: 30s, window: 1m, min_requests: 5 }\n"
)


@pytest.fixture
def lab(git_repo: GitRepo, tmp_path: Path) -> Iterator[ElasticLab]:
    """A local fleet of 4 simulated GPUs, policies/alarms.yaml naming ALARMS only."""
    git_repo.write("policies/alarms.yaml", ALARMS)
    yield from elastic_lab(git_repo, tmp_path, gpus=4)


def rollout(lab: ElasticLab) -> dict[str, Any]:
    """What the bot kept for the rollout in its lease note (checks.rollout)."""
    note = lab.agent().lease("reconciler", "a-test/peek", 0, peek=True).note or {}
    found: dict[str, Any] = (note.get("checks") or {}).get("rollout") or {}
    return found


def stage(lab: ElasticLab, name: str) -> dict[str, Any]:
    found: dict[str, Any] = rollout(lab).get("stages", {}).get(f"chat-8b/{name}") or {}
    return found


def url_of(lab: ElasticLab, unit: UnitRecord) -> str:
    fleet = lab.repo.path / f"fleets/{FLEET}.yaml"
    address = fleet.read_text().split("address: ")[1].split(",")[0]
    return f"http://{address}:{unit.port}"


def fault(url: str, **faults: Any) -> None:
    """Set faults on one simulated engine (POST /admin/faults)."""
    request = urllib.request.Request(
        f"{url}/admin/faults", data=json.dumps(faults).encode(), method="POST"
    )
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status == 200


def passes_until(lab: ElasticLab, done: Any, what: str, most: int = 30) -> int:
    """Reconcile passes until `done()` holds; how many it took."""
    for count in range(1, most + 1):
        lab.reconcile()
        if done():
            return count
    raise AssertionError(f"{what}: not after {most} passes; rollout {rollout(lab)}")
