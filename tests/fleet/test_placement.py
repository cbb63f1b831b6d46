"""Placement: domains, multi-node replicas, foreign processes, trial GPUs, running units."""

from __future__ import annotations

from reconciler.fleet.placement.gpus import Demand, HostState, Slot, place
from reconciler.spec.fleet import Fleet, Host


def fleet(*hosts: Host, trial: int = 0) -> Fleet:
    return Fleet(
        name="f",
        provider="p",
        hardware="h200",
        transport="local",
        hosts=list(hosts),
        trial_gpus=trial,
    )


def states(f: Fleet, **overrides: HostState) -> dict[str, HostState]:
    found = {h.name: HostState(gpus=tuple(range(h.gpus))) for h in f.hosts}
    found.update(overrides)
    return found


TWO_SERVERS = fleet(Host(name="a", gpus=8), Host(name="b", gpus=8))
RACK = fleet(*(Host(name=f"t{i}", gpus=4, domain="rack") for i in range(4)))


def test_replicas_never_share_a_gpu_and_fit_tightly() -> None:
    placed = place(
        [Demand("r1", 4, "r1"), Demand("r2", 4, "r2"), Demand("r3", 8, "r3")],
        TWO_SERVERS,
        states(TWO_SERVERS),
        8,
    )
    assert placed.errors == []
    assert placed.slots["r3"] == (Slot("a", tuple(range(8))),)  # largest first
    assert placed.slots["r1"] == (Slot("b", (0, 1, 2, 3)),)
    assert placed.slots["r2"] == (Slot("b", (4, 5, 6, 7)),)


def test_foreign_processes_and_trial_gpus_are_not_free() -> None:
    f = fleet(Host(name="a", gpus=8), Host(name="b", gpus=8), trial=4)
    seen = states(f, a=HostState(gpus=tuple(range(8)), foreign=frozenset({0, 1})))
    placed = place([Demand("x", 6, "x"), Demand("y", 4, "y")], f, seen, 8)
    assert placed.slots["x"] == (Slot("a", (2, 3, 4, 5, 6, 7)),)
    assert placed.slots["y"] == (Slot("b", (0, 1, 2, 3)),)  # b's 4–7 are the trial GPUs
    again = place(
        [Demand("z", 1, "z")],
        f,
        {
            "a": HostState(
                gpus=tuple(range(8)), units={"x": (2, 3, 4, 5, 6, 7)}, foreign=frozenset({0, 1})
            ),
            "b": HostState(gpus=tuple(range(8)), units={"y": (0, 1, 2, 3)}),
        },
        8,
    )
    assert again.errors == [
        "z needs 1 GPU in one domain; the most free in one domain of f "
        "is 0 (others are in use, busy with foreign processes, or kept "
        "as the fleet's 4 trial GPUs)"
    ]


def test_running_units_keep_their_gpus() -> None:
    seen = states(TWO_SERVERS, b=HostState(gpus=tuple(range(8)), units={"r1": (6, 7)}))
    placed = place([Demand("r1", 2, "r1"), Demand("r2", 8, "r2")], TWO_SERVERS, seen, 8)
    assert placed.slots["r1"] == (Slot("b", (6, 7)),)
    assert placed.slots["r2"] == (Slot("a", tuple(range(8))),)


def test_a_replica_spans_hosts_of_one_nvlink_domain() -> None:
    placed = place([Demand("wide", 8, "the decode pool")], RACK, states(RACK), 72)
    assert placed.slots["wide"] == (Slot("t0", (0, 1, 2, 3)), Slot("t1", (0, 1, 2, 3)))


def test_never_across_domains() -> None:
    placed = place([Demand("wide", 16, "the decode pool")], TWO_SERVERS, states(TWO_SERVERS), 8)
    assert placed.slots == {}
    assert placed.errors == [
        "the decode pool needs 16 GPUs in one domain; the largest domain of f has 8"
    ]


def test_a_big_simulated_host_is_split_into_domains() -> None:
    big = fleet(Host(name="sim", gpus=16))
    placed = place([Demand("a", 6, "a"), Demand("b", 6, "b")], big, states(big), 8)
    assert placed.slots["a"] == (Slot("sim", (0, 1, 2, 3, 4, 5)),)
    assert placed.slots["b"] == (Slot("sim", (8, 9, 10, 11, 12, 13)),)
