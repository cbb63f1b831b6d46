"""A Slurm fleet of the test cluster in a git repository of this project's denv files: the
login node is this machine (the bot runs there, so its agent and the routers are local), the
compute nodes are the lab's, and `denv` runs as a subprocess with the lab's SLURM_CONF."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

from reconciler.fleet.hostagent import AgentClient
from reconciler.fleet.transport import LocalTransport
from tests.conftest import require_installed
from tests.e2e.bot import bot_env, run_denv
from tests.labs.operated import Operated
from tests.labs.release import release_yaml, stage
from tests.labs.slurm import SlurmLab, installed
from tests.reconcile.conftest import GitRepo


def release_text(replicas: int = 2, batch: int = 128, gpus: int = 1) -> str:
    """chat-8b's denv.yaml: its canary on fleet `hpc`."""
    return release_yaml(stage("canary", "hpc"), replicas=replicas, batch=batch, gpus=gpus)


def fleet_file(lab: SlurmLab, trial_gpus: int = 4, rack: tuple[str, ...] = ()) -> str:
    """Fleet `hpc`: partition serve, trials in partition trial; nodes in `rack` share one
    NVLink domain (a replica may span them)."""
    hosts = [f"    - {{ name: login, address: {lab.controller_address}, gpus: 0 }}"]
    for node in lab.nodes:
        domain = ", domain: rack" if node.name in rack else ""
        hosts.append(f"    - {{ name: {node.name}, address: {node.address}, gpus: 4{domain} }}")
    return (
        "fleet:\n  name: hpc\n  provider: test\n  hardware: h200\n  simulated: true\n"
        f"  python: {sys.executable}\n  transport: slurm\n"
        "  slurm: { partition: serve, trial_partition: trial }\n"
        f"  trial_gpus: {trial_gpus}\n  hosts:\n" + "\n".join(hosts) + "\n"
    )


@dataclass
class SlurmFleet(Operated):
    repo: GitRepo
    lab: SlurmLab
    cache: Path
    timing: ClassVar[tuple[str, ...]] = ("--ready-timeout", "90s", "--drain", "3s")

    @property
    def env(self) -> dict[str, str]:
        return bot_env(self.cache, self.lab.env)

    @property
    def home(self) -> Path:
        return self.cache / "home"

    def release(self, replicas: int = 2, batch: int = 128, gpus: int = 1) -> str:
        self.repo.write("releases/chat-8b/denv.yaml", release_text(replicas, batch, gpus))
        return self.repo.commit(f"chat-8b: {replicas} replicas, max_batch {batch}")

    def denv(self, *args: str, fault: str | None = None) -> subprocess.CompletedProcess[str]:
        return run_denv(self.repo.path, self.env, *args, fault=fault)

    def jobs(self, active: bool = True) -> list[dict[str, str]]:
        """denv's jobs in the queue: id, name, state, nodes, partition."""
        states = ["-t", "PENDING,RUNNING,CONFIGURING,COMPLETING"] if active else ["-t", "all"]
        text = self.lab.run("squeue", "-h", *states, "-o", "%i|%j|%T|%N|%P|%k")
        rows = [dict(zip(("job", "name", "state", "nodes", "partition", "comment"),
                         line.split("|"), strict=True)) for line in text.splitlines()]  # fmt: skip
        return [row for row in rows if row["comment"].startswith("denv:")]

    def login_agent(self) -> AgentClient:
        return AgentClient(LocalTransport("login", env=self.env), python=sys.executable)

    def stop_all(self) -> None:
        """Cancel every job and stop every unit on the login node (also after a failure)."""
        for job in self.jobs():
            self.lab.run("scancel", job["job"])
        agent = self.login_agent()
        for unit in agent.units():
            agent.stop(unit.id, grace=1)


@pytest.fixture
def slurm_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmLab]:
    """One slurmctld, three slurmd nodes (4 GPUs each) in namespaces of their own, its own
    munged; everything stopped and every namespace removed afterwards, also on failure."""
    require_installed(installed(), "Slurm (slurmctld, slurmd, slurm-client, munge)")
    lab = SlurmLab(tmp_path_factory.mktemp("slurm"))
    lab.start()  # stops what it started when it fails
    try:
        yield lab
    finally:
        lab.stop()


@pytest.fixture
def slurm_fleet(slurm_lab: SlurmLab, git_repo: GitRepo, tmp_path: Path) -> Iterator[SlurmFleet]:
    """Fleet `hpc` on the lab (tests/labs/slurm_fleet.py) in a repository of denv's files;
    every job cancelled and every router stopped afterwards."""
    git_repo.write("fleets/hpc.yaml", fleet_file(slurm_lab))
    found = SlurmFleet(git_repo, slurm_lab, tmp_path / "cache")
    try:
        yield found
    finally:
        found.stop_all()
