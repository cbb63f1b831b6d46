"""Topology fit: one replica inside one NVLink domain; all replicas on the serving GPUs."""

from __future__ import annotations

import pytest

from reconciler.spec.fit import domain_capacities, fit
from reconciler.spec.fleet import Fleet, Host
from reconciler.spec.recipe import AggregatedTopology, DisaggregatedTopology, Parallel, Pool


def fleet(*hosts: Host, trial: int = 0, name: str = "f") -> Fleet:
    return Fleet(
        name=name,
        provider="p",
        hardware="h200",
        transport="local",
        hosts=list(hosts),
        trial_gpus=trial,
    )


SERVERS = fleet(Host(name="a", gpus=8), Host(name="b", gpus=8), name="h200-use1")
RACK = fleet(*(Host(name=f"t{i}", gpus=4, domain="rack") for i in range(18)), name="rack")


def agg(replicas: int, tp: int) -> AggregatedTopology:
    return AggregatedTopology(
        mode="aggregated", replicas=replicas, gpus=tp, parallel=Parallel(tp=tp)
    )


WIDE_EP = DisaggregatedTopology(
    mode="disaggregated",
    prefill=Pool(replicas=2, gpus=4, parallel=Parallel(tp=4)),
    decode=Pool(replicas=1, gpus=64, parallel=Parallel(tp=1, dp=64, ep=64)),
)


@pytest.mark.parametrize(
    ("target", "size", "expected"),
    [
        (SERVERS, 8, [8, 8]),
        (fleet(Host(name="big", gpus=16)), 8, [8, 8]),
        (fleet(Host(name="odd", gpus=12)), 8, [8, 4]),
        (RACK, 72, [72]),
    ],
    ids=["servers", "simulated-16", "remainder", "nvl72-trays"],
)
def test_domain_capacities(target: Fleet, size: int, expected: list[int]) -> None:
    assert domain_capacities(target, size) == expected


@pytest.mark.parametrize(
    ("topology", "target", "size", "reasons"),
    [
        (agg(2, 8), SERVERS, 8, []),
        (
            agg(1, 16),
            SERVERS,
            8,
            ["a replica needs 16 GPUs in one domain; the largest domain of h200-use1 has 8"],
        ),
        (
            WIDE_EP,
            SERVERS,
            8,
            ["the decode pool needs 64 GPUs in one domain; the largest domain of h200-use1 has 8"],
        ),
        (WIDE_EP, RACK, 72, []),
        (
            agg(3, 8),
            SERVERS,
            8,
            ["needs 24 GPUs; h200-use1 has 16 for serving (16 minus 0 trial GPUs)"],
        ),
        (
            agg(3, 5),
            SERVERS,
            8,
            [
                "the replicas need 15 of 16 serving GPUs, but a replica of 5 "
                "finds no domain of h200-use1 with room left (domains: 8, 8)"
            ],
        ),
    ],
    ids=[
        "fits",
        "replica-too-wide",
        "decode-pool-too-wide",
        "wide-ep-on-nvl72",
        "too-few-gpus",
        "fragmented",
    ],
)
def test_fit(
    topology: AggregatedTopology | DisaggregatedTopology,
    target: Fleet,
    size: int,
    reasons: list[str],
) -> None:
    assert fit(topology, target, size) == reasons


def test_trial_gpus_are_not_for_serving() -> None:
    with_trials = fleet(Host(name="a", gpus=8), Host(name="b", gpus=8), trial=8, name="t")
    assert fit(agg(2, 8), with_trials, 8) == [
        "needs 16 GPUs; t has 8 for serving (16 minus 8 trial GPUs)"
    ]
