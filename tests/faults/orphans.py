"""What the orphan fault tests share: the local lab fleet of simulated GPUs
(tests/labs/elastic_local.py) with releases written on it, and the lab's units by release."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from reconciler.fleet.model.observed import UnitRecord
from tests.labs.elastic_local import FLEET, ElasticLab, elastic_lab
from tests.labs.release import release_yaml, stage
from tests.reconcile.conftest import GitRepo


def empty_lab(repo: GitRepo, folder: Path) -> Iterator[ElasticLab]:
    """The lab fleet in a repository with no release yet; every unit stopped at the end."""
    repo.remove("releases/chat-8b")
    repo.commit("no release yet")
    yield from elastic_lab(repo, folder)


def put_release(lab: ElasticLab, name: str) -> None:
    """Release `name`: one replica of chat-8b on the lab fleet (and its router)."""
    lab.repo.write(f"releases/{name}/denv.yaml", release_yaml(stage("canary", FLEET)))


def alive(lab: ElasticLab, release: str) -> list[UnitRecord]:
    return [u for u in lab.units() if u.alive and u.labels.get("release") == release]


def plan_json(lab: ElasticLab) -> dict[str, Any]:
    done = lab.denv("plan", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def orphaned(found: dict[str, Any], release: str) -> list[dict[str, Any]]:
    """The orphans of `release` that `denv plan --json` or `denv status --json` shows."""
    return [o for o in found.get("orphans", []) if o["release"] == release]
