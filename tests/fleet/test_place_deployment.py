"""A deployment placed on a fleet as declared: largest replicas first, the tightest host,
one NVLink domain per replica, trial GPUs left alone, ports in blocks; a running router
where it runs."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.engines.placement import PORT_BLOCK, Placement
from reconciler.errors import PlacementError
from reconciler.fleet.drivers.registry import rules_of
from reconciler.fleet.model.observed import FleetObservation, HostObservation, UnitRecord
from reconciler.fleet.placement.gpus import declared_states, place_deployment
from reconciler.fleet.placement.ports import PortBook
from reconciler.fleet.placement.routers import RunningRouters
from reconciler.fleet.placement.slots import FleetHosts
from reconciler.spec.fleet import Fleet
from tests.engines.conftest import deployment, fleet, recipe


def place(topology: dict[str, Any], target: Fleet, domain_size: int = 8) -> Placement:
    spec = deployment(recipe(topology=topology))
    return place_deployment(spec, target, declared_states(target), domain_size, rules_of(target))


def layout(placement: Placement) -> list[tuple[str, int, int, str, list[int], int]]:
    return [(s.role, s.replica, s.node, s.host, s.gpu_indices, s.port) for s in placement.slots]


def test_replicas_fill_hosts_in_file_order() -> None:
    found = place({"mode": "aggregated", "replicas": 3, "gpus": 4}, fleet(hosts=2))
    assert layout(found) == [
        ("aggregated", 0, 0, "node-01", [0, 1, 2, 3], 8032),
        ("aggregated", 1, 0, "node-01", [4, 5, 6, 7], 8064),
        ("aggregated", 2, 0, "node-02", [0, 1, 2, 3], 8096),
    ]
    assert (found.router.host, found.router.address, found.router.port) == (
        "node-01", "10.0.0.1", 8000,
    )  # fmt: skip


def test_largest_replicas_first_and_pool_order_kept() -> None:
    topology = {
        "mode": "disaggregated",
        "prefill": {"replicas": 2, "gpus": 2, "parallel": {"tp": 2}},
        "decode": {"gpus": 8, "parallel": {"tp": 8}},
    }
    assert layout(place(topology, fleet(hosts=2))) == [
        ("prefill", 0, 0, "node-02", [0, 1], 8032),
        ("prefill", 1, 0, "node-02", [2, 3], 8064),
        ("decode", 0, 0, "node-01", list(range(8)), 8096),
    ]


def test_trial_gpus_are_the_fleets_last() -> None:
    found = place({"mode": "aggregated", "replicas": 3, "gpus": 2}, fleet(hosts=1, trial=2))
    assert [s.gpu_indices for s in found.slots] == [[0, 1], [2, 3], [4, 5]]
    with pytest.raises(PlacementError) as caught:
        place({"mode": "aggregated", "replicas": 4, "gpus": 2}, fleet(hosts=1, trial=2))
    assert str(caught.value) == (
        "replica 3 needs 2 GPUs in one domain; the most free in one domain of test is 0 "
        "(others are in use, busy with foreign processes, or kept as the fleet's 2 trial GPUs)"
    )


def test_a_replica_spans_hosts_only_inside_a_shared_domain() -> None:
    rack = fleet("gb200-nvl72", hosts=4, gpus=4, domain="rack-1")
    found = place({"mode": "aggregated", "gpus": 8, "parallel": {"tp": 8}}, rack, 72)
    assert layout(found) == [
        ("aggregated", 0, 0, "node-01", [0, 1, 2, 3], 8032),
        ("aggregated", 0, 1, "node-02", [0, 1, 2, 3], 8064),
    ]
    assert {s.nodes for s in found.slots} == {2}
    with pytest.raises(PlacementError) as caught:
        place({"mode": "aggregated", "gpus": 8, "parallel": {"tp": 8}}, fleet(hosts=2, gpus=4), 4)
    assert str(caught.value) == (
        "replica 0 needs 8 GPUs in one domain; the largest domain of test has 4"
    )


def test_a_large_host_is_split_into_domains() -> None:
    big = fleet(hosts=1, gpus=16)
    found = place({"mode": "aggregated", "replicas": 2, "gpus": 8, "parallel": {"tp": 8}}, big)
    assert [s.gpu_indices for s in found.slots] == [list(range(8)), list(range(8, 16))]
    with pytest.raises(
        PlacementError, match=r"needs 16 GPUs in one domain; the largest domain of test has 8"
    ):
        place({"mode": "aggregated", "gpus": 16, "parallel": {"tp": 16}}, big)


def test_addresses_and_router_host() -> None:
    local = Fleet.model_validate(
        {
            "name": "local",
            "provider": "local",
            "hardware": "h200",
            "transport": "local",
            "hosts": [{"name": "localhost", "gpus": 4}],
        }
    )
    assert place({"mode": "aggregated", "gpus": 1}, local).slots[0].address == "127.0.0.1"
    gateway = Fleet.model_validate(
        {
            "name": "gw",
            "provider": "test",
            "hardware": "h200",
            "ssh": {"user": "denv"},
            "hosts": [{"name": "h200-01", "gpus": 8}, {"name": "gateway", "gpus": 0}],
        }
    )
    found = place({"mode": "aggregated", "gpus": 1}, gateway)
    assert (found.slots[0].address, found.router.host) == ("h200-01", "gateway")


def test_ports_come_in_blocks_from_the_base_port() -> None:
    target = fleet(hosts=2)
    spec = deployment(recipe(topology={"mode": "aggregated", "replicas": 3, "gpus": 1}))
    found = place_deployment(
        spec, target, declared_states(target), 8, rules_of(target), base_port=20000
    )
    assert found.router.port == 20000
    assert [s.port for s in found.slots] == [20000 + PORT_BLOCK * i for i in (1, 2, 3)]


def test_a_running_deployment_grown_into_a_neighbours_ports_keeps_its_endpoint() -> None:
    """It ran one replica at 8000 (router) and 8032; a neighbour's block is 8064. At three
    replicas its span would reach 8064: the router stays at 8000 (the endpoint clients
    use) and the replicas take the lowest blocks free after it. Before, the whole span
    moved, router included (8000 -> 8096), and clients of 8000 were refused."""
    grown = place({"mode": "aggregated", "replicas": 3, "gpus": 1}, fleet(hosts=1))
    book = PortBook()
    for port, owner in ((8000, "chat"), (8032, "chat"), (8064, "neighbour")):
        book.hold("node-01", port, owner)
    kept = book.choose(grown, "chat", 8000, 8000)
    assert kept.router.port == 8000
    assert [s.port for s in kept.slots] == [8096, 8128, 8160]
    book.take(kept, "chat")
    assert book.choose(grown, "chat", 8000, 8000) == kept  # the next pass: where it runs


def test_a_deployment_whose_routers_block_is_taken_moves_whole() -> None:
    grown = place({"mode": "aggregated", "replicas": 2, "gpus": 1}, fleet(hosts=1))
    book = PortBook()
    book.hold("node-01", 8000, "neighbour")
    moved = book.choose(grown, "chat", 8000, 8000)
    assert (moved.router.port, [s.port for s in moved.slots]) == (8032, [8064, 8096])


def router_on(host: str, release: str = "chat", port: int = 8000) -> UnitRecord:
    labels = {"release": release, "stage": "canary", "fleet": "test", "role": "router"}
    return UnitRecord(id=f"{release}.canary.test.router", digest="d", port=port, labels=labels)


@pytest.mark.parametrize(
    ("seen", "answering", "stays"),
    [
        ({"node-02": [router_on("node-02")]}, {}, True),  # a host that answered
        ({}, {"node-02": [router_on("node-02")]}, True),  # not reached; the router answers
        ({"node-02": [router_on("node-02")]}, {"node-01": [router_on("node-01")]}, True),
        ({}, {}, False),  # nothing known of it: with the first replica
    ],
)
def test_a_router_stays_where_it_runs(
    seen: dict[str, list[UnitRecord]], answering: dict[str, list[UnitRecord]], stays: bool
) -> None:
    """Its replicas placed on node-01, the deployment's router stays on node-02 where it
    runs (clients know it there), found by that host's agent or, with the agent not
    reached, answering its worker API; what a host that answered says wins."""
    target = fleet(hosts=2)
    placed = place({"mode": "aggregated", "replicas": 2, "gpus": 1}, target)
    assert {s.host for s in placed.slots} == {"node-01"}
    observation = FleetObservation("test", answering={h: tuple(r) for h, r in answering.items()})
    for host in ("node-01", "node-02"):
        units = tuple(seen.get(host, ()))
        observation.hosts[host] = HostObservation(host=host, source="simulated", units=units)
    for host in answering:
        observation.hosts.pop(host)
        observation.errors[host] = f"{host}: refused"
    routers = RunningRouters.of("test", observation)
    kept = routers.kept(placed, ("chat", "canary", "test"), FleetHosts.of(target), rules_of(target))
    where = ("node-02", "10.0.0.2") if stays else ("node-01", "10.0.0.1")
    assert (kept.router.host, kept.router.address) == where
    assert kept.slots == placed.slots


def test_a_router_on_a_cordoned_host_or_beside_a_gateway_moves() -> None:
    target = fleet(hosts=2)
    placed = place({"mode": "aggregated", "gpus": 1}, target)
    seen = HostObservation(host="node-02", source="simulated", units=(router_on("node-02"),))
    cordoned = FleetObservation(
        "test", hosts={"node-02": seen.model_copy(update={"cordoned": True})}
    )
    key = ("chat", "canary", "test")
    moved = RunningRouters.of("test", cordoned).kept(
        placed, key, FleetHosts.of(target), rules_of(target)
    )
    assert moved.router.host == "node-01"
    gateway = target.model_copy(
        update={
            "hosts": [*target.hosts, target.hosts[0].model_copy(update={"name": "gw", "gpus": 0})]
        }
    )
    observed = FleetObservation("test", hosts={"node-02": seen})
    at_gateway = RunningRouters.of("test", observed).kept(
        placed, key, FleetHosts.of(gateway), rules_of(gateway)
    )
    assert at_gateway == placed  # the gateway keeps the fleet's routers


def test_of_two_routers_the_live_then_the_newest_stays() -> None:
    """A router started on node-01 while node-02's agent was not reached, and node-02's
    found again: the newer one (the endpoint `denv status` showed since) stays; a dead one
    never wins over a live one."""
    target = fleet(hosts=2)
    placed = place({"mode": "aggregated", "gpus": 1}, target)
    key = ("chat", "canary", "test")

    def kept(started: dict[str, float], dead: str | None = None) -> str:
        observation = FleetObservation("test")
        for host, at in started.items():
            record = router_on(host).model_copy(update={"started_at": at, "alive": host != dead})
            observation.hosts[host] = HostObservation(
                host=host, source="simulated", units=(record,)
            )
        routers = RunningRouters.of("test", observation)
        return routers.kept(placed, key, FleetHosts.of(target), rules_of(target)).router.host

    assert kept({"node-01": 200.0, "node-02": 100.0}) == "node-01"
    assert kept({"node-01": 100.0, "node-02": 200.0}) == "node-02"
    assert kept({"node-01": 100.0, "node-02": 200.0}, dead="node-02") == "node-01"
