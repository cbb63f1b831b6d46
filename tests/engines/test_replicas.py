"""A deployment's replicas as units: every replica of every pool, in pool order, each node of a
replica one process named by role, replica and node; only node 0 serves HTTP."""

from __future__ import annotations

import pytest

from reconciler.engines.replicas import unit_name
from reconciler.spec.repo import Repo
from tests.engines.conftest import fleet, recipe, units_of

PD = {
    "mode": "disaggregated",
    "prefill": {"gpus": 2, "replicas": 2, "parallel": {"tp": 2}},
    "decode": {"gpus": 16, "parallel": {"tp": 8, "pp": 2}},
}


def test_unit_names_say_the_node_only_when_a_replica_has_several() -> None:
    assert unit_name("decode", 1, 0, 1) == "decode-1"
    assert unit_name("decode", 1, 1, 2) == "decode-1-node1"


@pytest.mark.parametrize(("engine", "version"), [("vllm", "0.33.0"), ("sglang", "0.5.23")])
def test_every_replica_of_every_pool_in_order(repo: Repo, engine: str, version: str) -> None:
    spec = recipe(engine, version, topology=PD)
    found = units_of(repo, spec, fleet(hosts=3, domain="nvl"), domain_size=24)
    engine_units = [u for u in found if u.engine == engine]
    assert [u.name for u in engine_units] == [
        "prefill-0",
        "prefill-1",
        "decode-0-node0",
        "decode-0-node1",
    ]
    assert [u.port is not None for u in engine_units] == [True, True, True, False]
