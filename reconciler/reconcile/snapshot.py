"""Adapter: one look at the world — the desired state from git, what the fleets run, and the
plan between them. `denv plan` prints it; every reconcile pass starts from a fresh one."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

from reconciler.engines.base import url
from reconciler.errors import DenvError, failure
from reconciler.fleet.drivers.registry import Drivers
from reconciler.fleet.model.labels import fleet_key
from reconciler.fleet.model.observed import FleetObservation
from reconciler.fleet.placement.ports import address_of
from reconciler.reconcile import probes
from reconciler.reconcile.desired import (
    Counts,
    Desired,
    DesiredMemo,
    asked_counts,
    desired_units,
    fleets_of,
    observed_units,
)
from reconciler.reconcile.orphans import Orphan
from reconciler.reconcile.plan import Plan, plan
from reconciler.reconcile.revisions import Stages
from reconciler.reconcile.routers_seen import RoutersSeen, parse, remember, unreached_routers
from reconciler.reconcile.source import GitSource
from reconciler.spec.fleet import Fleet
from reconciler.spec.isolation import held_lines
from reconciler.spec.repo import Repo

# (the desired state at the counts that run, the observations) -> elastic deployments' counts
Scale = Callable[[Desired, Mapping[str, FleetObservation]], Counts]
OBSERVING_FLEETS = 16  # fleets observed at once (each one's hosts are asked at once already)
LEASE = "reconciler"  # the bot's lease on each fleet; its note keeps what the bot knows


@dataclass(frozen=True)
class Snapshot:
    head: str
    repo: Repo  # the head revision, with the last version of each retired fleet's file
    desired: Desired
    observations: dict[str, FleetObservation]
    plan: Plan
    routers: RoutersSeen = field(default_factory=dict)  # known after this look: the bot's note

    def unreached(self) -> dict[str, dict[str, str]]:
        """fleet -> host -> cause, for the hosts of the observed fleets that did not answer."""
        return {
            name: {host: seen.cause_text(host) for host in seen.errors}
            for name, seen in self.observations.items()
        }

    def unreadable(self) -> list[str]:
        """One error per host whose agent could not read a record it needs: its placement
        waits (nothing started or stopped there) until `denv fleet repair`."""
        return [
            f"fleet {name}: {seen.errors[host]}"
            for name, seen in sorted(self.observations.items())
            for host in sorted(seen.unreadable)
            if host in seen.errors
        ]


def snapshot(
    source: GitSource,
    drivers: Drivers,
    rev: str | None = None,
    status: Callable[[str], None] = lambda message: None,
    adjust: Callable[[Stages], Stages] | None = None,
    memo: DesiredMemo | None = None,
    scale: Scale | None = None,
    routers: RoutersSeen | None = None,
) -> Snapshot:
    """Read git at `rev` (default: the source's head), observe the fleets the running stages
    use (one agent round trip per host), and plan. `adjust` may change the revision a stage
    runs (a rollback the bot made before git records it: a layer above ours decides). A
    running loop passes its `memo` (reconcile.desired.DesiredMemo) from pass to pass; its
    `scale` (a layer above ours: the autoscaler) chooses the count of elastic deployments
    from the desired state at the count they run now. `routers`: those the caller last knew
    (a running bot's); None: read from the lease note of a fleet with a host not reached."""
    status(f"fetching {source.label}")
    source.sync()
    head = source.resolve(rev)
    status(f"loading {head[:12]}")
    loaded = source.repo_at(head)
    stages = source.stages(head)
    if adjust is not None:
        stages = adjust(stages)
    # The running stages' fleets, and those of releases removed lately; the head's other
    # fleets too, kept where denv's units run there: orphans (a release rewound away) are
    # found whatever history says.
    names = fleets_of(stages, source.repo_at) | source.recent_fleets(head)
    # Fleets whose file was removed (with a release, or after it): their last version says
    # where denv's units may still run; what runs there is shown, never taken as gone.
    retired = source.retired_fleets(head, names - set(loaded.fleets))
    fleets = {n: r.fleet for n, r in retired.items() if r.fleet is not None} | loaded.fleets
    if len(fleets) > len(loaded.fleets):
        loaded = replace(loaded, fleets=fleets)
    hosts = sum(len(fleet.hosts) for fleet in fleets.values())
    status(f"observing {len(fleets)} fleets ({hosts} hosts)")
    observations = {
        name: seen
        for name, seen in observe(drivers, loaded, fleets).items()
        if _kept(seen, used=name in names, retired=name in retired)
    }  # where nothing of denv's answered on a fleet no stage uses: as if not looked at
    known = keep_routers(drivers, fleets, observations, routers)
    desired = desired_units(stages, source.repo_at, observations, rules=drivers.get, memo=memo)
    counts = scale(desired, observations) if scale is not None else {}
    if any(counts.get(key, asked) != asked for key, asked in asked_counts(desired).items()):
        desired = desired_units(
            stages, source.repo_at, observations, rules=drivers.get, memo=memo, counts=counts
        )
    planned = plan(desired, observed_units(observations))
    return Snapshot(
        head=head,
        repo=loaded,
        desired=desired,
        observations=observations,
        routers=known,
        plan=planned.model_copy(
            update={
                "orphans": with_removals(planned.orphans, source, head),
                "invalid_files": (
                    *held_lines(loaded),
                    *(p for r in retired.values() if (p := r.problem()) is not None),
                ),
            }
        ),
    )


def observe(
    drivers: Drivers, repo: Repo, fleets: Mapping[str, Fleet]
) -> dict[str, FleetObservation]:
    """Every fleet observed at once (each driver asks its hosts at once): a pass waits for the
    slowest fleet, not for their sum, and a fleet whose hosts time out delays no other. One
    fleet's failure is its own: its observation says why."""

    def one(name: str) -> FleetObservation:
        fleet = fleets[name]
        try:
            return drivers.get(fleet).observe(repo.resolve_hardware(fleet.hardware))
        except Exception as exc:  # a host's answer, or a bug: this fleet only
            reason = f"fleet {name} not observed: {failure(exc)}"
            return FleetObservation.failed(name, [host.name for host in fleet.hosts], reason)

    names = sorted(fleets)
    if len(names) < 2:
        return {name: one(name) for name in names}
    with ThreadPoolExecutor(max_workers=min(len(names), OBSERVING_FLEETS)) as pool:
        return dict(zip(names, pool.map(one, names), strict=True))


def keep_routers(
    drivers: Drivers,
    fleets: Mapping[str, Fleet],
    observations: Mapping[str, FleetObservation],
    known: RoutersSeen | None,
) -> RoutersSeen:
    """The routers known after this look (reconcile/routers_seen.py). Each observation gets,
    for its hosts not reached, the routers last seen there that answer their worker API now
    (its `answering`): they stay where they run. `known` None: what the bot noted is read
    from the lease note of each fleet with a host not reached."""
    previous: RoutersSeen = dict(known) if known is not None else {}
    for name, seen in sorted(observations.items()):
        fleet = fleets.get(name)
        if not seen.errors or not seen.hosts or fleet is None:
            continue  # all answered, or none did (nothing is placed there then)
        if known is None:
            previous[name] = noted_routers(drivers, fleet).get(name, {})
        rules = drivers.get(fleet)
        for host, records in unreached_routers(seen, previous).items():
            address = address_of(fleet, rules, host)
            answering = tuple(
                record
                for record in records
                if address is not None
                and record.port is not None
                and probes.workers_at(url(address, record.port)) is not None
            )
            if answering:
                seen.answering[host] = answering
    return remember(previous, observations)


def noted_routers(drivers: Drivers, fleet: Fleet) -> RoutersSeen:
    """The routers the bot's last note on `fleet` keeps; none when it cannot be read."""
    try:
        note = drivers.get(fleet).lease(LEASE, "status", 0, peek=True).note
    except DenvError:
        return {}
    return parse((note or {}).get("routers"))


def _kept(seen: FleetObservation, used: bool, retired: bool) -> bool:
    """Whether a fleet's observation is shown: a fleet a stage uses or used lately, always; a
    retired one where denv's units answered or a host did not (what runs there is not known);
    any other where denv's units answered."""
    if retired:
        return _denvs(seen) or bool(seen.errors)
    return used or _denvs(seen)


def _denvs(seen: FleetObservation) -> bool:
    """Whether a unit denv started for this fleet runs on one of its hosts that answered."""
    return any(
        fleet_key(record, seen.fleet) is not None
        for host in seen.hosts.values()
        for record in host.units
    )


def with_removals(orphans: Sequence[Orphan], source: GitSource, head: str) -> tuple[Orphan, ...]:
    """Each orphan with the commit that removed its deployment, where history says."""
    found = source.removals(head, {o.key for o in orphans})
    return tuple(o.model_copy(update={"removal": found[o.key]}) for o in orphans)
