"""Pure logic: the routers the bot last saw running, host by host, kept with its lease note
(`routers` in the note) so that a router stays where it runs while its host's agent cannot
be asked (unreachable, hung, its disk full, a record there unreadable).

A router is its deployment's endpoint: clients know it by address and port. When its host
stops answering the agent, the replicas there are placed anew on the hosts that answer, but
the router is kept where it runs as long as it answers its worker API (the bot keeps its
worker list over HTTP, not through the agent): moving it would refuse every client of the
old endpoint, and once the host is back the old router would be stopped. A router that does
not answer either is placed anew with the first replica (the endpoint moves; `denv status`
shows the new one). P/D routers, which have no worker API, are always placed anew.

Each look at the fleets replaces a host's routers with what answered there, and keeps what
was seen last on a host that did not answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from reconciler.fleet.model.labels import router_key
from reconciler.fleet.model.observed import FleetObservation, UnitRecord
from reconciler.reconcile.desired import DesiredDeployment

# fleet -> host -> the routers of denv's deployments that ran there when it last answered
RoutersSeen = dict[str, dict[str, tuple[UnitRecord, ...]]]


def routers_on(records: Iterable[UnitRecord], fleet: str) -> tuple[UnitRecord, ...]:
    """The live routers of denv's deployments on `fleet` among `records`."""
    return tuple(r for r in records if r.alive and router_key(r, fleet) is not None)


def remember(
    previous: Mapping[str, Mapping[str, tuple[UnitRecord, ...]]],
    observations: Mapping[str, FleetObservation],
) -> RoutersSeen:
    """What is known after a look at `observations`: each host that answered with the
    routers it runs, each host that did not with what was seen there before; a fleet not
    looked at as before. Hosts a fleet no longer has are forgotten with it."""
    found: RoutersSeen = {f: dict(hosts) for f, hosts in previous.items()}
    for fleet, seen in observations.items():
        hosts: dict[str, tuple[UnitRecord, ...]] = {}
        for host, observed in seen.hosts.items():
            if routers := routers_on(observed.units, fleet):
                hosts[host] = routers
        for host in seen.errors:
            if kept := previous.get(fleet, {}).get(host):
                hosts[host] = tuple(kept)
        found[fleet] = hosts
    return {fleet: hosts for fleet, hosts in found.items() if hosts}


def with_desired(known: RoutersSeen, deployments: Sequence[DesiredDeployment]) -> RoutersSeen:
    """`known` and each desired router where it is placed: what a pass that started a router
    knows of it (its snapshot was taken before). One that did not start answers nothing, so
    it is never kept where it is not."""
    found: RoutersSeen = {f: dict(hosts) for f, hosts in known.items()}
    for deployment in deployments:
        for unit in deployment.units:
            if unit.unit.role != "router" or unit.unit.port is None:
                continue
            hosts = found.setdefault(deployment.fleet, {})
            there = hosts.get(unit.host, ())
            if all(r.id != unit.id or r.digest != unit.digest for r in there):
                record = UnitRecord(
                    id=unit.id,
                    digest=unit.digest,
                    port=unit.unit.port,
                    labels=unit.labels,
                    alive=True,
                )
                hosts[unit.host] = (*there, record)
    return found


def unreached_routers(seen: FleetObservation, known: RoutersSeen) -> dict[str, list[UnitRecord]]:
    """host -> the routers last seen on each of the fleet's hosts that did not answer."""
    last = known.get(seen.fleet, {})
    return {host: list(last[host]) for host in sorted(seen.errors) if last.get(host)}


def parse(data: Any) -> RoutersSeen:
    """Routers as written in a note; a record that does not read as one is left out (then
    its router, if its host does not answer, is placed anew: the behaviour without a note)."""
    found: RoutersSeen = {}
    if not isinstance(data, dict):
        return found
    for fleet, hosts in data.items():
        if not isinstance(hosts, dict):
            continue
        for host, records in hosts.items():
            read = []
            for record in records if isinstance(records, list) else ():
                try:
                    read.append(UnitRecord.model_validate(record))
                except ValidationError:
                    continue
            if read:
                found.setdefault(str(fleet), {})[str(host)] = tuple(read)
    return found


# What a note keeps of a router: enough to pair it with its desired unit and to ask it over
# HTTP; never its environment or command line (the note is read by `denv status` anywhere).
KEPT_FIELDS = {"id", "digest", "port", "labels", "alive", "restart", "started_at"}


def dump(known: RoutersSeen) -> dict[str, dict[str, list[dict[str, Any]]]]:
    return {
        fleet: {
            host: [r.model_dump(mode="json", include=KEPT_FIELDS) for r in records]
            for host, records in hosts.items()
        }
        for fleet, hosts in known.items()
    }
