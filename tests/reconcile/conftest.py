"""Fixtures for the reconciler tests: real git repositories holding a copy of this repository's
denv files, commits made with pygit2, and what the agents would report after an apply."""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path

import pygit2
import pytest

from reconciler.fleet.drivers.registry import rules_of
from reconciler.fleet.model.observed import (
    FleetObservation,
    Gpu,
    GpuProcess,
    HostObservation,
    UnitRecord,
)
from reconciler.reconcile.desired import Desired, desired_units
from reconciler.reconcile.plan import Plan, plan
from reconciler.reconcile.source import GitSource
from tests.labs.release import release_yaml

SIGNATURE = pygit2.Signature("denv tests", "tests@denv.invalid", 1_700_000_000, 0)


class GitRepo:
    """A denv repository under git: edit its files, then commit them on main."""

    def __init__(self, path: Path, cache: Path) -> None:
        self.path = path
        self.git = pygit2.init_repository(str(path), initial_head="main")
        self.cache = cache  # where remote clones go

    def write(self, relative: str, text: str) -> None:
        (self.path / relative).parent.mkdir(parents=True, exist_ok=True)
        (self.path / relative).write_text(text)

    def replace(self, relative: str, old: str, new: str) -> None:
        text = (self.path / relative).read_text()
        assert text.count(old) == 1, f"{relative}: expected one '{old}'"
        self.write(relative, text.replace(old, new))

    def remove(self, relative: str) -> None:
        """A file or a folder."""
        path = self.path / relative
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()

    def commit(self, message: str = "change") -> str:
        index = self.git.index
        index.add_all()
        index.write()
        parents = [] if self.git.head_is_unborn else [self.git.head.target]
        commit = self.git.create_commit(
            "HEAD", SIGNATURE, SIGNATURE, message, index.write_tree(), parents
        )
        return str(commit)

    def pin(self, release: str, stage: str, revision: str) -> None:
        self.write(
            f"releases/{release}/promotions.yaml",
            f"promotions:\n  {stage}: {{ revision: {revision} }}\n",
        )

    def source(self) -> GitSource:
        return GitSource(str(self.path), self.cache)


@pytest.fixture
def git_repo(denv_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> GitRepo:
    """This repository's denv files, committed once on main (results left out)."""
    repo = GitRepo(denv_repo, tmp_path_factory.mktemp("cache"))
    repo.commit("initial")
    return repo


def desired_of(repo: GitRepo, observations: dict[str, FleetObservation] | None = None) -> Desired:
    source = repo.source()
    head = source.resolve()
    stages = source.stages(head)
    return desired_units(stages, source.repo_at, observations or {}, rules=rules_of)


def applied(desired: Desired, alive: bool = True) -> list[tuple[str, UnitRecord]]:
    """(host, record) for every desired unit, as the agent reports it once launched."""
    return [
        (
            unit.host,
            UnitRecord(
                id=unit.id,
                digest=unit.digest,
                argv=tuple(unit.unit.argv),
                port=unit.unit.port,
                gpus=tuple(unit.unit.gpu_indices),
                pid=1000 + number,
                alive=alive,
                labels=unit.labels,
            ),
        )
        for number, unit in enumerate(u for d in desired.deployments for u in d.units)
    ]


def observation(
    records: Iterable[tuple[str, UnitRecord]],
    fleet: str = "local",
    hosts: dict[str, int] | None = None,
    busy: dict[str, set[int]] | None = None,
    errors: dict[str, str] | None = None,
    listening: dict[str, set[int]] | None = None,
) -> FleetObservation:
    """A fleet as its agents report it: `hosts` name -> GPU count (the local fleet's 16 GPUs
    by default), the records on them, and GPUs busy with processes denv did not start."""
    listed = list(records)
    found = FleetObservation(fleet, errors=dict(errors or {}))
    for host, count in (hosts or {"localhost": 16}).items():
        mine = tuple(record for where, record in listed if where == host)
        pids = {i: r.pid for r in mine if r.alive and r.pid for i in r.gpus}
        pids |= {i: 99 for i in (busy or {}).get(host, set())}  # a process denv did not start
        gpus = tuple(
            Gpu(index=i, processes=(GpuProcess(pid=pids[i]),) if i in pids else ())
            for i in range(count)
        )
        found.hosts[host] = HostObservation(
            host=host,
            source="simulated",
            gpus=gpus,
            units=mine,
            listening=tuple(sorted((listening or {}).get(host, set()))),
        )
    return found


def plan_of(repo: GitRepo, records: list[tuple[str, UnitRecord]], **fleet: object) -> Plan:
    """Desired state from `repo`, observed state from `records` on the local fleet."""
    seen = observation(records, **fleet)  # type: ignore[arg-type]
    desired = desired_of(repo, {"local": seen})
    return plan(desired, {"local": {h: o.units for h, o in seen.hosts.items()}})


def kinds(result: Plan) -> list[tuple[str, str]]:
    """(kind, unit id) of every action that changes something, in plan order."""
    return [(a.kind.value, a.unit) for a in result.actions if a.kind.value != "keep"]


def add_release(repo: GitRepo, name: str, replicas: int, gpus: int = 1, batch: int = 64) -> None:
    """One more release of the 8B recipe, one stage on the local fleet."""
    text = release_yaml(model=name, replicas=replicas, gpus=gpus, batch=batch)
    repo.write(f"releases/{name}/denv.yaml", text)
