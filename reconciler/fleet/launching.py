"""Pure logic: an engine unit as the host agent launches it — its id on the host and a
digest of everything that makes it what it is, so a changed spec is seen as a change."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from reconciler.engines.runtime import Need
from reconciler.engines.units import Unit
from reconciler.spec.base import Spec


def unit_digest(unit: Unit) -> str:
    """Digest of what the process is: argv, env, GPUs and port (not where it was decided).
    A router's worker list is left out: the reconciler keeps it current through the router's
    API, so scaling out or in never restarts the endpoint."""
    argv = _without_workers(unit.argv) if unit.role == "router" else unit.argv
    essence: dict[str, object] = {
        "argv": argv,
        "env": unit.env,
        "gpus": unit.gpu_indices,
        "port": unit.port,
    }
    if unit.restart:
        essence["restart"] = True
    if unit.cpus:
        essence["cpus"] = unit.cpus
    if unit.node_argv:
        essence["node_argv"] = unit.node_argv
    return hashlib.sha256(json.dumps(essence, sort_keys=True).encode()).hexdigest()[:16]


def _without_workers(argv: list[str]) -> list[str]:
    if "--worker-urls" not in argv:
        return argv
    start = argv.index("--worker-urls") + 1
    end = next((i for i in range(start, len(argv)) if argv[i].startswith("--")), len(argv))
    return argv[: start - 1] + argv[end:]


def one_unit_per_replica(units: list[Unit]) -> list[Unit]:
    """Each replica over several hosts as one unit, node 0's, that carries the other nodes'
    processes (`node_argv`, by host) and names every host (`hosts`): what a scheduler starts
    as one job over its nodes. Units of one host, routers and the simulator's one process for
    a whole replica are left as they are."""
    nodes: dict[tuple[str, int], list[Unit]] = {}
    for unit in units:
        nodes.setdefault((unit.role, unit.replica), []).append(unit)
    found = []
    for unit in units:
        replica = sorted(nodes[(unit.role, unit.replica)], key=lambda u: u.node)
        if unit.role == "router" or len(replica) == 1:
            found.append(unit)
        elif unit.node == 0:
            others = replica[1:]
            hosts = [unit.host, *(u.host for u in others)]
            node_argv = {u.host: u.argv for u in others}
            found.append(unit.model_copy(update={"hosts": hosts, "node_argv": node_argv}))
    return found


def launch_payload(
    unit: Unit, unit_id: str, cleanup: list[str] | None = None, image: str | None = None
) -> dict[str, Any]:
    """What the agent's `launch` reads on stdin; a container unit also says how to remove its
    container and which argv item is the image (the agent runs the digest it pinned)."""
    payload: dict[str, Any] = {
        "id": unit_id,
        "digest": unit_digest(unit),
        "argv": unit.argv,
        "env": unit.env,
        "port": unit.port,
        "gpus": unit.gpu_indices,
    }
    metrics = unit.metrics
    if metrics is not None and metrics.running is not None and metrics.port == unit.port:
        # kept in its record: an orphan, whose deployment git no longer has, is drained too
        payload["metrics"] = metrics.model_dump(include={"path", "running", "waiting"})
    if unit.restart:
        payload["restart"] = True
    if unit.cpus:
        payload["cpus"] = unit.cpus
    if unit.hosts:
        payload["hosts"] = unit.hosts
    if unit.node_argv:
        payload["node_argv"] = unit.node_argv
    if cleanup:
        payload["cleanup"] = cleanup
    if image:
        payload["image"] = image
    return payload


class HostedUnit(Spec):
    """A unit as its host runs it (in its container or venv), under its id and labels, with
    what `prepare` must make ready there first: the reconciler's units and bench trials."""

    id: str
    host: str
    labels: dict[str, str]
    unit: Unit
    need: Need | None = None  # the runtime to prepare; None: the simulator
    weights: str | None = None  # the weights to cache on the host
    cleanup: list[str] | None = None
    image: str | None = None
    user: str | None = None  # the unprivileged user it runs as on the host (a trial's engine)
    # what its GPU indices count: None, the host's GPUs (claimed machine-wide, one engine per
    # GPU whatever the user); a simulated fleet's "FLEET.HOST": that fleet's own GPUs
    gpu_scope: str | None = None

    def payload(self) -> dict[str, Any]:
        """What the agent's `launch` reads on stdin."""
        payload = launch_payload(self.unit, self.id, self.cleanup, self.image)
        return {**payload, **self.placement()}

    def placement(self) -> dict[str, Any]:
        """What the payload says beside the unit: its labels, user and GPU scope."""
        extra: dict[str, Any] = {"labels": dict(self.labels)}
        if self.user:
            extra["user"] = self.user
        if self.gpu_scope:
            extra["gpu_scope"] = self.gpu_scope
        return extra
