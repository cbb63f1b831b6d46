"""Apply runs the actions of a wave at once: launches on different hosts overlap, a host that
does not answer holds only its own actions, the replaces of one deployment stay one after
another while deployments roll side by side, and a fleet never has more than its
`parallel_actions` actions under way.

The fleets are held in memory by a fake driver we own (registered in Drivers' kinds); its
calls meet at barriers, so a test passes only when the calls it names run at the same time.
Units have no port and no readiness probe: they are ready once launched."""

from __future__ import annotations

import _thread
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from reconciler.engines.units import Unit
from reconciler.errors import DenvError
from reconciler.fleet.drivers.base import DriverKind
from reconciler.fleet.drivers.registry import Drivers
from reconciler.fleet.launching import unit_digest
from reconciler.fleet.model.observed import FleetObservation, Gpu, HostObservation, UnitRecord
from reconciler.fleet.threads import run_all
from reconciler.reconcile import probes
from reconciler.reconcile.apply import Applier, ApplyOptions, ApplyReport
from reconciler.reconcile.desired import Desired, DesiredDeployment, DesiredUnit, FleetCapacity
from reconciler.reconcile.plan import plan
from reconciler.spec.catalog import Hardware
from reconciler.spec.fleet import Fleet, Host
from reconciler.spec.repo import Repo
from tests.reconcile.memory_driver import QuietVerbs, launched

HEAD = "0" * 40
HANG = 30.0  # seconds a barrier waits before it breaks: a guard against a hung test only

Hook = Callable[[str, str], None]  # (host, unit id): runs inside the call, may block or raise


class Hosts:
    """What runs on the fake fleets' hosts, every call in the order it began and ended, and
    the most calls that were under way at once on each fleet."""

    def __init__(self) -> None:
        self.running: dict[tuple[str, str], dict[str, UnitRecord]] = {}
        self.calls: list[tuple[str, str, str]] = []  # ("launch"/"stop" + " in"/" out", host, unit)
        self.launched: list[Mapping[str, Any]] = []  # every launch payload
        self.asked = 0  # calls listing a host's units
        self.active: dict[str, int] = {}
        self.most: dict[str, int] = {}
        self.lock = threading.Lock()
        self.on_launch: Hook = lambda host, unit: None
        self.on_stop: Hook = lambda host, unit: None

    def call(self, fleet: str, verb: str, host: str, unit: str, hook: Hook) -> None:
        with self.lock:
            self.calls.append((f"{verb} in", host, unit))
            self.active[fleet] = self.active.get(fleet, 0) + 1
            self.most[fleet] = max(self.most.get(fleet, 0), self.active[fleet])
        try:
            hook(host, unit)
        finally:
            with self.lock:
                self.active[fleet] -= 1
                self.calls.append((f"{verb} out", host, unit))

    def observed(self) -> dict[str, dict[str, tuple[UnitRecord, ...]]]:
        found: dict[str, dict[str, tuple[UnitRecord, ...]]] = {}
        for (fleet, host), units in self.running.items():
            found.setdefault(fleet, {})[host] = tuple(units.values())
        return found


class FakeDriver(QuietVerbs):
    """A fleet kept in `Hosts`: launching records a live unit, stopping removes it."""

    python = "/fake/bin/python"

    def __init__(self, fleet: Fleet, hosts: Hosts) -> None:
        self.fleet = fleet
        self.hosts = hosts

    def address(self, host: Host) -> str:
        return "127.0.0.1"

    def default_home(self) -> str:
        return "/fake/home"

    def observe(self, hardware: Hardware | None) -> FleetObservation:
        found = FleetObservation(self.fleet.name)
        for host in self.fleet.hosts:
            units = tuple(self.hosts.running.get((self.fleet.name, host.name), {}).values())
            found.hosts[host.name] = HostObservation(
                host=host.name,
                source="simulated",
                gpus=tuple(Gpu(index=i) for i in range(host.gpus)),
                units=units,
            )
        return found

    def prepare(self, host: str, payload: Mapping[str, Any], wait: float) -> Any:
        return {"id": payload["id"], "state": "done", "step": "done"}

    def launch(self, host: str, unit: Mapping[str, Any]) -> UnitRecord:
        self.hosts.call(self.fleet.name, "launch", host, unit["id"], self.hosts.on_launch)
        record = launched(unit)
        with self.hosts.lock:
            self.hosts.running.setdefault((self.fleet.name, host), {})[record.id] = record
            self.hosts.launched.append(unit)
        return record

    def stop(self, host: str, unit_id: str, grace: float = 10.0) -> dict[str, Any]:
        self.hosts.call(self.fleet.name, "stop", host, unit_id, self.hosts.on_stop)
        with self.hosts.lock:
            self.hosts.running.get((self.fleet.name, host), {}).pop(unit_id, None)
        return {"stopped": unit_id}

    def units(self, host: str) -> list[UnitRecord]:
        with self.hosts.lock:
            self.hosts.asked += 1
            return list(self.hosts.running.get((self.fleet.name, host), {}).values())


def fleet(name: str, hosts: int, parallel: int = 16, gpus: int = 1, prune: bool = False) -> Fleet:
    return Fleet(
        name=name,
        provider="local",
        hardware="h200",
        transport="local",
        hosts=[Host(name=f"{name}-h{i}", gpus=gpus) for i in range(hosts)],
        parallel_actions=parallel,
        prune=prune,
    )


def deployment(
    release: str, fleet: str, hosts: list[str], version: str, gpu: int = 0, port: int | None = None
) -> DesiredDeployment:
    """One single-GPU replica on each of `hosts`, running `version` on GPU `gpu`; with a
    port, it listens there (and may surge)."""
    labels = {"release": release, "stage": "s", "fleet": fleet, "revision": HEAD}
    units = []
    for replica, host in enumerate(hosts):
        listen = ["--port", str(port)] if port is not None else []
        unit = Unit(
            name=f"aggregated-{replica}",
            role="aggregated",
            replica=replica,
            node=0,
            engine="fake",
            host=host,
            address="127.0.0.1",
            argv=["serve", version, *listen],
            env={},
            port=port,
            gpus=1,
            gpu_indices=[gpu],
        )
        units.append(
            DesiredUnit(
                id=f"{release}.s.{fleet}.aggregated-{replica}",
                fleet=fleet,
                host=host,
                digest=unit_digest(unit),
                labels={**labels, "role": "aggregated"},
                replica_gpus=1,
                unit=unit,
            )
        )
    return DesiredDeployment(
        release=release, stage="s", fleet=fleet, revision=HEAD, gpus=len(hosts), endpoint=None,
        units=tuple(units),
    )  # fmt: skip


class Lab:
    """Fake fleets, a repository that declares them, and apply with a fresh Applier."""

    def __init__(self, *fleets: Fleet) -> None:
        self.hosts = Hosts()
        self.repo = Repo(label="test", fleets={f.name: f for f in fleets})
        self.said: list[str] = []
        self.stop = threading.Event()  # SIGTERM
        self.applier: Applier | None = None

    def drivers(self) -> Drivers:
        hosts = self.hosts

        def make(fleet: Fleet, warn: Callable[[str], None], env: Mapping[str, str] | None):
            return FakeDriver(fleet, hosts)

        kinds: dict[str, DriverKind] = {"local": make}
        return Drivers(kinds=kinds)

    def apply(self, *deployments: DesiredDeployment, room: bool = False) -> ApplyReport:
        """Apply `deployments`; with `room`, the plan says a replica fits beside each (surge)."""
        capacity = {
            name: FleetCapacity(
                fleet=name, gpus=f.gpus, trial_gpus=0, observed=True, room={1: room}
            )
            for name, f in self.repo.fleets.items()
        }
        prune = frozenset(name for name, f in self.repo.fleets.items() if f.prune)
        wanted = Desired(head=HEAD, deployments=deployments, fleets=capacity, prune=prune)
        drivers = self.drivers()
        seen = {name: drivers.get(f).observe(None) for name, f in self.repo.fleets.items()}
        applier = Applier(
            self.repo,
            drivers,
            ApplyOptions(ready_timeout=0),
            say=self.said.append,
            stopping=self.stop.is_set,
        )
        self.applier = applier
        return applier.apply(plan(wanted, self.hosts.observed()), wanted.deployments, seen)


def meet(barrier: threading.Barrier) -> None:
    try:
        barrier.wait(timeout=HANG)
    except threading.BrokenBarrierError:
        raise DenvError("no other call ran meanwhile") from None


def test_the_units_waited_on_at_once_on_one_host_share_each_ask_of_its_agent() -> None:
    """16 replicas starting on one host: one ask a second of what runs there, not 16."""
    lab = Lab(fleet("a", 1))
    context = Applier(lab.repo, lab.drivers()).context
    since = time.monotonic()  # what each wait takes: an answer given since it began
    run_all(lambda _: context.records("a", "a-h0", since), range(16), 16)
    assert lab.hosts.asked == 1
    context.records("a", "a-h0", time.monotonic())  # none that recent: asked again
    assert lab.hosts.asked == 2


def test_launches_on_different_hosts_run_at_once() -> None:
    lab = Lab(fleet("a", 2))
    together = threading.Barrier(2)
    lab.hosts.on_launch = lambda host, unit: meet(together)
    report = lab.apply(deployment("r", "a", ["a-h0", "a-h1"], "v1"))
    assert report.errors == []
    assert report.done == {"start": 2}
    assert sorted(lab.said) == [  # one whole line per action
        "+ start r.s.a.aggregated-0 on a-h0",
        "+ start r.s.a.aggregated-1 on a-h1",
    ]


def test_a_host_that_does_not_answer_holds_only_its_own_launch() -> None:
    lab = Lab(fleet("a", 4))
    ended = threading.Semaphore(0)  # released by each other host's launch

    def launch(host: str, unit: str) -> None:
        if host != "a-h0":
            ended.release()
            return
        for _ in range(3):  # a-h0 comes first in the plan; it answers after the others ran
            if not ended.acquire(timeout=HANG):
                raise DenvError("the other launches waited for a-h0")
        raise DenvError("a-h0: no answer within its deadline")

    lab.hosts.on_launch = launch
    report = lab.apply(deployment("r", "a", ["a-h0", "a-h1", "a-h2", "a-h3"], "v1"))
    assert report.errors == ["r.s.a.aggregated-0: a-h0: no answer within its deadline"]
    assert report.done == {"start": 3}
    assert sorted(lab.hosts.observed()["a"]) == ["a-h1", "a-h2", "a-h3"]


def test_stops_on_different_hosts_run_at_once() -> None:
    lab = Lab(fleet("a", 2, prune=True))  # units nothing wants any more are stopped
    assert lab.apply(deployment("r", "a", ["a-h0", "a-h1"], "v1")).errors == []
    together = threading.Barrier(2)
    lab.hosts.on_stop = lambda host, unit: meet(together)
    report = lab.apply()  # nothing is wanted any more
    assert report.errors == []
    assert report.done == {"stop": 2}
    assert lab.hosts.observed() == {"a": {"a-h0": (), "a-h1": ()}}


HOSTS = ["a-h0", "a-h1", "a-h2"]


def events(lab: Lab, release: str) -> list[tuple[str, str]]:
    return [(event, unit) for event, _, unit in lab.hosts.calls if unit.startswith(release + ".")]


def test_deployments_roll_side_by_side_each_one_replica_at_a_time() -> None:
    lab = Lab(fleet("a", 3))
    assert (
        lab.apply(deployment("p", "a", HOSTS, "v1"), deployment("q", "a", HOSTS, "v1")).errors == []
    )
    lab.hosts.calls.clear()
    firsts = threading.Barrier(2)  # the first replace of each deployment, at the same time

    def stop(host: str, unit: str) -> None:
        if unit.endswith("aggregated-0"):
            meet(firsts)

    lab.hosts.on_stop = stop
    report = lab.apply(deployment("p", "a", HOSTS, "v2"), deployment("q", "a", HOSTS, "v2"))
    assert report.errors == []
    assert report.done == {"replace": 6}
    for release in ("p", "q"):  # within a deployment: one replica, then the next, in order
        assert events(lab, release) == [
            (f"{verb} {edge}", f"{release}.s.a.aggregated-{replica}")
            for replica in range(3)
            for verb in ("stop", "launch")
            for edge in ("in", "out")
        ]


def test_a_failed_replace_ends_the_roll_of_its_own_deployment_only() -> None:
    lab = Lab(fleet("a", 3))
    old = (deployment("p", "a", HOSTS, "v1"), deployment("q", "a", HOSTS, "v1"))
    assert lab.apply(*old).errors == []
    before = {u.id: u.digest for d in old for u in d.units}
    failing = {"p.s.a.aggregated-0"}

    def launch(host: str, unit: str) -> None:
        if unit in failing:
            failing.discard(unit)  # the new spec fails; putting the old one back works
            raise DenvError("refused")

    lab.hosts.on_launch = launch
    new = (deployment("p", "a", HOSTS, "v2"), deployment("q", "a", HOSTS, "v2"))
    report = lab.apply(*new)
    assert report.done == {"replace": 3}
    assert len(report.errors) == 2 and "p.s.a.aggregated-0: refused" in report.errors
    after = {u.id: u.digest for d in new for u in d.units}
    running = {r.id: r.digest for units in lab.hosts.running.values() for r in units.values()}
    assert running == {
        **{unit: digest for unit, digest in before.items() if unit.startswith("p.")},
        **{unit: digest for unit, digest in after.items() if unit.startswith("q.")},
    }


def test_surge_replicas_rolling_at_once_on_one_host_take_different_gpus_and_ports() -> None:
    lab = Lab(fleet("a", 1, gpus=4))  # GPUs 0 and 1 serve, 2 and 3 are free
    p, q = ("p", 0, 8000), ("q", 1, 9000)
    old = [deployment(name, "a", ["a-h0"], "v1", gpu, port) for name, gpu, port in (p, q)]
    assert lab.apply(*old).errors == []
    together = threading.Barrier(2)  # both surge replicas start at the same time

    def launch(host: str, unit: str) -> None:
        if unit.endswith("~surge"):
            meet(together)

    lab.hosts.on_launch = launch
    new = [deployment(name, "a", ["a-h0"], "v2", gpu, port) for name, gpu, port in (p, q)]
    report = lab.apply(*new, room=True)
    assert report.errors == []
    assert report.done == {"replace": 2}
    surges = [u for u in lab.hosts.launched if u["id"].endswith("~surge")]
    assert sorted(u["id"] for u in surges) == [
        "p.s.a.aggregated-0~surge",
        "q.s.a.aggregated-0~surge",
    ]
    assert sorted(g for u in surges for g in u["gpus"]) == [2, 3]
    assert len({u["port"] for u in surges}) == 2
    assert sorted(lab.hosts.running[("a", "a-h0")]) == ["p.s.a.aggregated-0", "q.s.a.aggregated-0"]


def test_a_fleet_runs_at_most_its_parallel_actions_at_once() -> None:
    lab = Lab(fleet("a", 6, parallel=2))
    pairs = threading.Barrier(2)
    lab.hosts.on_launch = lambda host, unit: meet(pairs)
    report = lab.apply(deployment("r", "a", [f"a-h{i}" for i in range(6)], "v1"))
    assert report.errors == []
    assert report.done == {"start": 6}
    assert lab.hosts.most == {"a": 2}


def test_fleets_run_side_by_side_each_within_its_own_bound() -> None:
    lab = Lab(fleet("a", 2, parallel=1), fleet("b", 2, parallel=1))
    across = threading.Barrier(2)  # a launch of each fleet, at the same time

    def launch(host: str, unit: str) -> None:
        if unit.endswith("aggregated-0"):
            meet(across)

    lab.hosts.on_launch = launch
    report = lab.apply(
        deployment("r", "a", ["a-h0", "a-h1"], "v1"), deployment("r", "b", ["b-h0", "b-h1"], "v1")
    )
    assert report.errors == []
    assert report.done == {"start": 4}
    assert lab.hosts.most == {"a": 1, "b": 1}


def test_sigterm_starts_no_further_action() -> None:
    lab = Lab(fleet("a", 3, parallel=1))
    lab.hosts.on_launch = lambda host, unit: lab.stop.set()
    report = lab.apply(deployment("r", "a", ["a-h0", "a-h1", "a-h2"], "v1"))
    assert [call for call in lab.hosts.calls if call[0] == "launch in"] == [
        ("launch in", "a-h0", "r.s.a.aggregated-0")
    ]
    assert report.done == {"start": 1}  # the one started (no probe: ready at once)


def test_ctrl_c_stops_the_actions_under_way_as_sigterm_does() -> None:
    lab = Lab(fleet("a", 3, parallel=1))

    def launch(host: str, unit: str) -> None:
        _thread.interrupt_main()  # Ctrl-C while the bot waits for the wave
        assert lab.applier is not None
        assert probes.wait_until(lab.applier.stopping, HANG, interval=0.01)

    lab.hosts.on_launch = launch
    with pytest.raises(KeyboardInterrupt):
        lab.apply(deployment("r", "a", ["a-h0", "a-h1", "a-h2"], "v1"))
    assert [call for call in lab.hosts.calls if call[0] == "launch in"] == [
        ("launch in", "a-h0", "r.s.a.aggregated-0")
    ]
