"""An elastic stage on a local fleet of simulated GPUs: a test repository with one host on a
loopback address of its own, the chat-8b release with replica bounds and a scaling policy
written into policies/scaling.yaml, and `denv` run on it as its operator runs it."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from reconciler.fleet.hostagent import AgentClient
from reconciler.fleet.model.observed import UnitRecord
from reconciler.fleet.transport import LocalTransport
from tests.e2e.bot import bot_env, run_denv
from tests.labs.operated import Operated
from tests.labs.release import release_yaml, stage
from tests.reconcile.conftest import GitRepo

FLEET = "lab"
# Decided at every pass (interval 0s); one more replica while more than one request waits;
# without a prediction (most tests drive the reactive signals: waiting requests), one fewer
# once none waits, `down` after the last change.
POLICY = (
    "scaling:\n  fast:\n    interval: 0s\n    window: 5s\n    predictive: {predictive}\n"
    "    target_utilization: {utilization}\n    max_waiting_per_replica: 1\n"
    "    up: {{ delay: 0s, step: {step} }}\n"
    "    down: {{ delay: {down}, step: 1, drain_grace: 30s }}\n"
)


def fleet_text(gpus: int) -> str:
    """One host of `gpus` simulated H200s at a loopback address of its own: ports 8000+ there
    are clear of any other test's."""
    address = f"127.{random.randint(64, 254)}.{random.randint(0, 254)}.1"
    return (
        f"fleet:\n  name: {FLEET}\n  provider: local\n  hardware: h200\n  simulated: true\n"
        f"  transport: local\n  hosts:\n    - {{ name: localhost, address: {address}, "
        f"gpus: {gpus} }}\n"
    )


@dataclass
class ElasticLab(Operated):
    repo: GitRepo
    cache: Path
    timing: ClassVar[tuple[str, ...]] = ("--ready-timeout", "60s", "--drain", "5s")

    def __post_init__(self) -> None:
        """The lab's state (its engines' growing logs) inside the repository's work tree is
        never staged, or a commit reads a log while it grows ("failed to read file into
        stream"): every lab of a repository, a second home's too."""
        work_tree, cache = self.repo.path.resolve(), self.cache.resolve()
        if cache.is_relative_to(work_tree):
            exclude = work_tree / ".git" / "info" / "exclude"
            exclude.parent.mkdir(parents=True, exist_ok=True)
            with exclude.open("a") as stream:
                stream.write(f"/{cache.relative_to(work_tree).as_posix()}/\n")

    def policy(
        self, down: str = "0s", step: int = 1, predictive: bool = False, utilization: float = 0.7
    ) -> None:
        """The `fast` policy; `predictive` with each replica run at `utilization` of what the
        simulator says it holds (a small one: light traffic needs several)."""
        text = POLICY.format(
            down=down, step=step, predictive=str(predictive).lower(), utilization=utilization
        )
        self.repo.write("policies/scaling.yaml", text)

    def release(self, low: int, high: int, batch: int = 2) -> str:
        """chat-8b on the lab, `low`–`high` replicas of the fast policy, max_batch `batch`
        (small: a few requests at once queue on a replica)."""
        bounds = f"replicas: {{ min: {low}, max: {high}, policy: fast }}"
        text = release_yaml(stage("canary", FLEET, bounds), batch=batch, replicas=low)
        self.repo.write("releases/chat-8b/denv.yaml", text)
        return self.repo.commit(f"chat-8b: {low}–{high} replicas, max_batch {batch}")

    @property
    def env(self) -> dict[str, str]:
        return bot_env(self.cache)

    def denv(self, *args: str, fault: str | None = None) -> subprocess.CompletedProcess[str]:
        return run_denv(self.repo.path, self.env, *args, fault=fault, timeout=240)

    def json(self, *args: str) -> dict[str, Any]:
        done = self.denv(*args, "--json")
        assert done.returncode == 0, done.stdout + done.stderr
        found: dict[str, Any] = json.loads(done.stdout)
        return found

    def agent(self) -> AgentClient:
        return AgentClient(LocalTransport(env=self.env), python=sys.executable)

    def units(self) -> list[UnitRecord]:
        return self.agent().units()

    def engines(self) -> list[UnitRecord]:
        """The live engines (the router left out), by replica."""
        live = [u for u in self.units() if u.alive and u.labels.get("role") == "aggregated"]
        return sorted(live, key=lambda u: int(u.labels.get("replica", "0")))

    def deployment(self) -> dict[str, Any]:
        [row] = [d for d in self.status()["deployments"] if d["fleet"] == FLEET]
        return row

    def endpoint(self) -> str:
        return f"{self.deployment()['endpoint']}/v1"

    def stop_all(self) -> None:
        agent = self.agent()
        for unit in agent.units():
            agent.stop(unit.id, grace=1)


def elastic_lab(repo: GitRepo, folder: Path, gpus: int = 4) -> Iterator[ElasticLab]:
    """The lab, its fleet committed; every unit stopped at the end, also when a test failed."""
    cache = folder / "cache"
    repo.write(f"fleets/{FLEET}.yaml", fleet_text(gpus))
    repo.commit("a local lab fleet")
    found = ElasticLab(repo, cache)
    found.policy()
    try:
        yield found
    finally:
        found.stop_all()
