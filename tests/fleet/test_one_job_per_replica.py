"""A replica over several hosts as one unit (what a scheduler starts as one job over its
nodes): node 0's unit carries the other nodes' processes; one-host replicas, the router and
the simulator's one process for a whole replica are left alone."""

from __future__ import annotations

from reconciler.engines.units import EngineContext, Unit
from reconciler.fleet.drivers.registry import rules_of
from reconciler.fleet.launching import launch_payload, one_unit_per_replica, unit_digest
from reconciler.fleet.placement.placer import FleetPlacer
from reconciler.spec.catalog import Hardware
from reconciler.spec.fleet import Fleet
from reconciler.spec.loader import open_repo
from tests.conftest import ROOT
from tests.engines.conftest import deployment, recipe


def unit(name: str, node: int, host: str, argv: list[str], replica: int = 0) -> Unit:
    head = node == 0
    return Unit(
        name=name, role="router" if name == "router" else "aggregated", replica=replica,
        node=node, engine="sglang", host=host, address=f"10.0.0.{host[-1]}", argv=argv,
        env={}, port=8001 if head else None, gpus=4, gpu_indices=[0, 1, 2, 3],
    )  # fmt: skip


TWO_NODES = [
    unit("aggregated-0", 0, "n1", ["engine", "--node-rank", "0"]),
    unit("aggregated-0-node1", 1, "n2", ["engine", "--node-rank", "1"]),
    unit("aggregated-1", 0, "n3", ["engine"], replica=1),
    unit("router", 0, "login", ["router"]),
]


def test_node_0_carries_the_other_nodes_processes() -> None:
    folded = one_unit_per_replica(TWO_NODES)
    assert [u.name for u in folded] == ["aggregated-0", "aggregated-1", "router"]
    head = folded[0]
    assert head.hosts == ["n1", "n2"]
    assert head.node_argv == {"n2": ["engine", "--node-rank", "1"]}
    payload = launch_payload(head, "r.s.f.aggregated-0")
    assert (payload["hosts"], payload["node_argv"]) == (head.hosts, head.node_argv)
    assert folded[1:] == TWO_NODES[2:]  # one host, and the router: as they were
    assert one_unit_per_replica(folded) == folded  # folding twice changes nothing


def test_a_change_on_another_node_changes_the_digest() -> None:
    changed = [*TWO_NODES]
    changed[1] = changed[1].model_copy(update={"argv": ["engine", "--node-rank", "1", "--x"]})
    before, after = one_unit_per_replica(TWO_NODES)[0], one_unit_per_replica(changed)[0]
    assert before.argv == after.argv
    assert unit_digest(before) != unit_digest(after)
    assert unit_digest(TWO_NODES[0]) != unit_digest(before)  # not the node-0 process alone


def test_the_placer_folds_a_two_node_replica_on_a_slurm_fleet() -> None:
    """vLLM over two 4-GPU nodes of one domain: one unit on a Slurm fleet (holding the GPUs of
    both nodes), two on an SSH fleet of the same hosts."""
    repo = open_repo(ROOT)
    hardware = repo.resolve_hardware("h200")
    assert isinstance(hardware, Hardware)
    context = EngineContext(hardware=hardware, model=repo.models["llama-3.1-8b"])
    spec = deployment(recipe(topology={"mode": "aggregated", "gpus": 8}))
    hosts = [{"name": "login", "gpus": 0}] + [
        {"name": f"n{i}", "address": f"10.0.0.{i}", "gpus": 4, "domain": "rack"} for i in (1, 2)
    ]
    found = {}
    for transport, extra in (
        ("slurm", {"slurm": {"partition": "serve"}}),
        ("ssh", {"ssh": {"user": "denv"}}),
    ):
        fleet = Fleet.model_validate(
            {"name": "test", "provider": "t", "hardware": "h200", "transport": transport,
             "hosts": hosts, **extra}
        )  # fmt: skip
        placer = FleetPlacer(fleet, 8, None, lambda _key: True, 8000, rules_of(fleet))
        found[transport] = [u for u in placer.add(spec, context) if u.role != "router"]
        assert placer.room({4}) == {4: False}  # both nodes' GPUs are held
    [job] = found["slurm"]
    assert (job.hosts, list(job.node_argv)) == (["n1", "n2"], ["n2"])
    assert [u.argv for u in found["ssh"]] == [job.argv, job.node_argv["n2"]]
