"""Adapter: the `slurm` kind of fleet — GPU hosts that are the nodes of a Slurm cluster, where
engines run as jobs the scheduler allocates, and one host without GPUs, the login node, where
denv's agent runs (over SSH with the fleet's `ssh` block; without it, the bot runs there).

Through the login node's agent: a unit on a node is a job named by the unit's id, pinned to
the nodes the plan chose (`--nodelist`), one job over every node of a replica that spans
several; observing is one agent call that asks Slurm twice (squeue for denv's jobs, sinfo for
the nodes), whatever the number of jobs; stop is scancel. Routers, leases and the prepare
jobs run on the login node as on any agent host (the nodes share its filesystem).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from threading import Lock
from typing import Any

from reconciler.errors import DenvError
from reconciler.fleet.drivers.agent import AgentDriver, declared_devices, unreached
from reconciler.fleet.model.answers import (
    CancelAnswer,
    ClusterAnswer,
    LogsAnswer,
    SlurmNode,
)
from reconciler.fleet.model.observed import (
    Cause,
    FleetObservation,
    Gpu,
    GpuProcess,
    HostObservation,
    UnitRecord,
)
from reconciler.fleet.model.slurmjob import job_request
from reconciler.fleet.transport import LocalTransport, Transport
from reconciler.spec.catalog import Hardware
from reconciler.spec.fleet import Fleet, Host
from reconciler.spec.kindsettings import SlurmSettings

FRESH_S = 1.0  # a queue read this recently answers `units` (readiness waits poll it)
# Node states (sinfo's long form) where nothing new is placed and what runs moves away.
CORDONED = ("drain", "down", "fail", "maint", "reboot", "power", "not_responding", "unknown")


class SlurmDriver(AgentDriver):
    def __init__(
        self,
        fleet: Fleet,
        warn: Callable[[str], None] = lambda _m: None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(fleet, warn, env)
        self._cluster: tuple[float, ClusterAnswer] | None = None
        self._reading = Lock()

    # --- the kind's rules ------------------------------------------------------------------

    @property
    def settings(self) -> SlurmSettings:
        found = self.fleet.settings(SlurmSettings)
        assert found is not None  # the fleet model requires it for slurm
        return found

    def dial(self, host: Host) -> Transport:
        if self.fleet.ssh is None:
            return LocalTransport(host.name, env=self.env)
        from reconciler.fleet.ssh import SshTransport

        return SshTransport(host, self.fleet.ssh, warn=self.warn, fleet=self.fleet.name)

    @property
    def python(self) -> str:
        """The fleet's interpreter; where the bot runs on the login node and the fleet file
        keeps the default, the bot's own (the nodes share its filesystem)."""
        if self.fleet.ssh is None and self.fleet.python == "python3":
            return sys.executable
        return self.fleet.python

    def user_home(self) -> str:
        if self.fleet.ssh is not None:
            user = self.fleet.ssh.user
            return "/root/.denv" if user == "root" else f"/home/{user}/.denv"
        env = self.env if self.env is not None else os.environ
        return env.get("DENV_HOME") or f"{env.get('HOME', os.path.expanduser('~'))}/.denv"

    @property
    def login(self) -> str:
        """The login node: the fleet's first host without GPUs."""
        return next(host.name for host in self.fleet.hosts if host.gpus == 0)

    def _scheduled(self, host: str) -> bool:
        return host != self.login

    def _partitions(self) -> list[str]:
        settings = self.settings
        return sorted({settings.partition, settings.trial_partition or settings.partition})

    # --- observing ----------------------------------------------------------------------

    def cluster(self, fresh: bool = True) -> ClusterAnswer:
        """The nodes and denv's jobs, from one agent call (squeue and sinfo on the login
        node); with fresh=False, the last answer when it is under FRESH_S old."""
        with self._reading:
            if not fresh and self._cluster and time.monotonic() - self._cluster[0] < FRESH_S:
                return self._cluster[1]
        found = self.agent(self.login).call(
            "slurm-observe", answer=ClusterAnswer, payload={"partitions": self._partitions()}
        )
        with self._reading:
            self._cluster = (time.monotonic(), found)
        return found

    def observe(self, hardware: Hardware | None) -> FleetObservation:
        fleet = self.fleet
        found = FleetObservation(fleet.name)
        login = next(h for h in fleet.hosts if h.name == self.login)
        client = self.agent(login.name)
        declared = declared_devices(fleet, login, hardware)
        with ThreadPoolExecutor(max_workers=2) as pool:
            probing = pool.submit(client.probe, declared)
            asking = pool.submit(self.cluster)
            outcomes: list[Any] = []
            for future in (probing, asking):
                try:
                    outcomes.append(future.result())
                except DenvError as exc:
                    outcomes.append(exc)
        seen, cluster = outcomes
        if isinstance(seen, DenvError):
            unreached(found, login.name, seen)
        else:
            found.hosts[login.name] = seen
        nodes = [h for h in fleet.hosts if h.gpus > 0]
        if isinstance(cluster, DenvError):
            for host in nodes:
                unreached(found, host.name, cluster)
            return found
        home = seen.home if isinstance(seen, HostObservation) else None
        by_name = {node.name: node for node in cluster.nodes}
        records: dict[str, list[UnitRecord]] = {}
        ours: dict[str, set[int]] = {}  # node -> GPUs that denv's running jobs hold there
        for record in cluster.jobs:
            if record.nodes:
                records.setdefault(record.nodes[0], []).append(record)
            for name in record.nodes if record.alive else ():
                ours.setdefault(name, set()).update(record.gpus)
        partitions = ", ".join(self._partitions())
        for host in nodes:
            node = by_name.get(host.name)
            if node is None:
                found.errors[host.name] = f"{host.name}: not a node of partition {partitions}"
                found.causes[host.name] = Cause.FAILED
                continue
            mine = records.get(host.name, [])
            found.hosts[host.name] = node_observation(
                host, node, mine, ours.get(host.name, set()), home
            )
        return found

    # --- units --------------------------------------------------------------------------

    def launch(self, host: str, unit: Mapping[str, Any]) -> UnitRecord:
        if not self._scheduled(host):
            return super().launch(host, unit)
        settings = self.settings
        trial = "release" not in unit.get("labels", {})  # bench runs and optimizer trials
        nodes = list(unit.get("hosts") or [host])
        request = {**job_request(settings, nodes, trial), "unit": dict(unit), "python": self.python}
        answer = self.agent(self.login).call("slurm-submit", answer=UnitRecord, payload=request)
        self._cluster = None
        return answer

    def stop(self, host: str, unit_id: str, grace: float = 10.0) -> dict[str, Any]:
        if not self._scheduled(host):
            return super().stop(host, unit_id, grace)
        payload = {"id": unit_id, "host": host, "grace": grace}
        answer = self.agent(self.login).call(
            "slurm-cancel", answer=CancelAnswer, payload=payload, timeout=grace + 40
        )
        self._cluster = None
        return answer.model_dump(mode="json")

    def units(self, host: str) -> list[UnitRecord]:
        if not self._scheduled(host):
            return super().units(host)
        return [r for r in self.cluster(fresh=False).jobs if r.nodes[:1] == (host,)]

    def logs(self, host: str, unit_id: str, tail: int = 100) -> dict[str, Any]:
        if not self._scheduled(host):
            return super().logs(host, unit_id, tail)
        answer = self.agent(self.login).call("slurm-logs", unit_id, str(tail), answer=LogsAnswer)
        return answer.model_dump(mode="json")

    def prepare(self, host: str, payload: Mapping[str, Any], wait: float) -> Any:
        """On the login node: the nodes read runtimes and weights from the shared filesystem."""
        return super().prepare(self.login, payload, wait)

    def runtimes(self, host: str) -> dict[str, Any]:
        return super().runtimes(self.login)

    @property
    def lease_host(self) -> str:
        """The login node's agent keeps the fleet's leases."""
        return self.login


def node_observation(
    host: Host, node: SlurmNode, records: list[UnitRecord], ours: set[int], home: str | None
) -> HostObservation:
    """A node as placement sees it: its GPUs (as many as jobs not of denv hold, foreign;
    `ours` is what denv's jobs hold), denv's jobs whose first node it is, and whether it is
    cordoned (drained, down). A job over several nodes is reported on its first; placement
    holds the same GPUs for it on the others."""
    state = node.state
    cordoned = None
    if any(word in state.lower() for word in CORDONED) or state.endswith("*"):
        reason = node.reason
        cordoned = f"{state}" + (f": {reason}" if reason else "")
    total = node.gpus
    foreign = max(0, node.gpus_used - len(ours))
    free = [i for i in range(total) if i not in ours]
    busy = set(sorted(free, reverse=True)[:foreign])  # held by others' jobs: the highest
    gpus = tuple(
        Gpu(
            index=i,
            name=f"{node.name} gpu {i}",
            processes=(GpuProcess(pid=0),) if i in busy else (),
        )
        for i in range(total)
    )
    return HostObservation(
        host=host.name,
        source="slurm",
        gpus=gpus,
        units=tuple(records),
        home=home,
        cordoned=cordoned,
        scheduler_state=state or None,
    )
