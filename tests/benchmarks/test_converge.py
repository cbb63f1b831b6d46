"""benchmarks/converge.py's workspace: the fleet and releases it generates plan as the benchmark
says, at the sizes it is run at, without starting any process but the agent's probe."""

from __future__ import annotations

import importlib.util
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent


def load_converge() -> ModuleType:
    spec = importlib.util.spec_from_file_location("converge", ROOT / "benchmarks/converge.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("replicas", "deployments", "spare"),
    [(16, 4, 1), (64, 1, 1), (64, 8, 0)],
    ids=["16-in-4", "64-in-1", "64-in-8-no-spare"],
)
def test_workspace_plans_every_replica_and_a_router_per_deployment(
    replicas: int, deployments: int, spare: int
) -> None:
    converge = load_converge()
    ws = converge.Workspace(replicas, deployments, spare, timeout=60)
    try:
        ws.release(batch=128)
        snap = ws.look()
        assert snap.plan.counts.get("start") == replicas + deployments
        engines = Counter(
            d.release for d in snap.desired.deployments for u in d.units if u.unit.role != "router"
        )
        assert engines == {name: replicas // deployments for name in ws.names}
        units = converge.units_of(snap)
        assert sum(u.role == "router" for u in units) == deployments
        assert len({u.port for u in units}) == len(units)  # no two units share a port
        assert snap.repo.fleets["bench"].gpus == replicas + spare * deployments
    finally:
        ws.teardown()
    assert not ws.root.exists()


def test_replicas_that_do_not_split_into_the_deployments_are_refused() -> None:
    converge = load_converge()
    with pytest.raises(SystemExit, match="do not split"):
        converge.Workspace(6, 4, 1, timeout=60)
