"""The fleet-kind seam: a kind of fleet that is not in the package (tests/reconcile/podkind.py:
its settings block, its way of running a unit, its driver) plugs in by one registry entry —
the line reconciler/spec/fleetkinds.py would gain. On a fleet of real GPUs (not simulated),
a reconcile pass reads the fleet file with the kind's block, places the release with the
kind's own rules, makes each unit runnable the kind's way (a pod, not `docker run` nor a
venv: no host reports a container engine), launches through its driver, and the next look
finds what it launched and plans nothing more."""

from __future__ import annotations

import pytest

from reconciler.fleet.drivers.registry import Drivers
from reconciler.reconcile.apply import Applier, ApplyOptions
from reconciler.reconcile.plan import ActionKind
from reconciler.reconcile.snapshot import snapshot
from reconciler.spec.fleetkinds import FLEET_KINDS
from reconciler.spec.loader import open_repo
from reconciler.spec.schema import schema_for
from tests.reconcile import podkind
from tests.reconcile.conftest import GitRepo

POD_FLEET = """fleet:
  name: local
  provider: a Kubernetes cluster
  hardware: h200
  transport: pods
  pods: { namespace: inference }
  hosts:
    - { name: node-a, gpus: 8 }
    - { name: node-b, gpus: 8 }
"""


@pytest.fixture
def pods(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(FLEET_KINDS, "pods", podkind.KIND)
    podkind.PodDriver.launched = []


@pytest.mark.usefixtures("pods")
def test_a_new_kind_of_fleet_plugs_in_by_one_registry_entry(git_repo: GitRepo) -> None:
    git_repo.write("fleets/local.yaml", POD_FLEET)
    git_repo.commit("the local fleet is a cluster of pods")
    drivers = Drivers()  # no stand-ins: the driver comes from the kind's card
    first = snapshot(git_repo.source(), drivers)
    assert not first.desired.errors
    starts = [a for a in first.plan.actions if a.kind == ActionKind.START]
    assert starts, "the release's units are planned on the pods fleet"
    units = [u for d in first.desired.deployments for u in d.units]
    assert {u.unit.address for u in units} <= {"node-a.pods.invalid", "node-b.pods.invalid"}
    engines = [u for u in units if u.unit.role != "router"]
    assert engines
    for unit in engines:  # the engine's own command, in a pod of the namespace
        assert unit.unit.argv[:4] == ["pod", "run", unit.id, "--namespace=inference"]
        assert "serve" in unit.unit.argv and "docker" not in unit.unit.argv
        assert f"{podkind.VOLUME}/Llama-3.1-8B-Instruct@" in " ".join(unit.unit.argv)
        assert unit.need is None and unit.image is None  # nothing for an agent to prepare

    applier = Applier(first.repo, drivers, ApplyOptions(ready_timeout=0, drain_grace=0))
    applier.apply(first.plan, first.desired.deployments)
    by_id = {u.id: u for u in units}
    assert sorted(podkind.PodDriver.launched) == sorted(
        (a.host, list(by_id[a.unit].unit.argv)) for a in starts
    )

    again = snapshot(git_repo.source(), drivers)  # observed through the pods' driver
    assert {a.kind for a in again.plan.actions} <= {ActionKind.KEEP}


@pytest.mark.usefixtures("pods")
def test_a_fleet_of_the_new_kind_is_checked_with_its_own_settings_model(
    git_repo: GitRepo,
) -> None:
    git_repo.write("fleets/local.yaml", POD_FLEET.replace("inference", "Not_A_Namespace"))
    problems = [str(p) for p in open_repo(git_repo.path).errors]
    assert len(problems) == 1 and "fleets/local.yaml:6:" in problems[0], problems
    assert "fleet.pods.namespace: String should match pattern" in problems[0]


@pytest.mark.usefixtures("pods")
def test_the_fleet_schema_lists_the_new_kind_and_its_block() -> None:
    fleet = schema_for("fleet")["$defs"]["Fleet"]
    assert fleet["properties"]["transport"]["enum"] == ["local", "ssh", "slurm", "pods"]
    block = fleet["properties"]["pods"]["anyOf"][0]
    assert block["required"] == ["namespace"] and block["additionalProperties"] is False
    assert fleet["additionalProperties"] is False
