"""A router stays where it runs while its host is isolated: a fleet of two hosts (real sshd
in network namespaces), both replicas and the router on the first; one replica's record there
truncated. The host is left alone (what runs there is not known) and the replicas are placed
on the second host, but the router, which still answers, keeps its endpoint: its clients go
on being answered, by the new replicas. Once the record is repaired, the router is the same
process on the same port. (Before, the router was started anew beside the first new replica,
the endpoint moved to the second host, and the old router was stopped once the first host was
repaired: every client of the old endpoint was refused, and no alarm saw it.)"""

from __future__ import annotations

from reconciler.fleet.model.answers import UnitsAnswer
from reconciler.fleet.model.observed import UnitRecord
from tests.e2e.load import ask
from tests.e2e.test_reconcile import Lab, endpoint, fleet_file, lab
from tests.labs.sshd import ssh_lab

__all__ = ["lab", "ssh_lab"]  # the fixtures

FLEET = "duo"
MACHINES = ("lab", "lab2")  # the lab's two sshd hosts, here one fleet's duo-h0 and duo-h1


def two_hosts(lab: Lab) -> str:
    head = fleet_file(FLEET, lab.servers["lab"], lab.ssh).split("  hosts:\n")[0]
    hosts = "".join(
        f"    - {{ name: {FLEET}-h{i}, address: {lab.servers[m].address}, gpus: 2 }}\n"
        for i, m in enumerate(MACHINES)
    )
    return f"{head}  hosts:\n{hosts}"


def live(lab: Lab, machine: str) -> dict[str, UnitRecord]:
    """The live units of the records the machine's agent can read."""
    listed = lab.agent(machine).call("units", answer=UnitsAnswer)
    return {u.id: u for u in listed.units if u.alive}


def test_a_router_keeps_its_endpoint_while_its_host_is_isolated(lab: Lab) -> None:
    lab.repo.write(f"fleets/{FLEET}.yaml", two_hosts(lab))
    lab.release(replicas=2, fleets=FLEET)
    lab.reconcile()
    url = endpoint(lab.status(), FLEET)
    first = live(lab, "lab")
    [router] = [u for u in first.values() if u.id.endswith("router")]
    engines = sorted(i for i in first if i != router.id)
    assert len(engines) == 2 and not live(lab, "lab2"), (first, live(lab, "lab2"))
    path = lab.servers["lab"].folder / "denv-home" / "units" / f"{engines[0]}.json"
    path.write_bytes(path.read_bytes()[:40])

    isolated = lab.reconcile(ok=False)

    said = isolated.stdout + isolated.stderr
    assert isolated.returncode == 1 and f"unit record {path} is unreadable" in said, said
    moved = live(lab, "lab2")
    assert sorted(moved) == engines, said  # both replicas placed anew on the second host
    assert "router" not in " ".join(moved) and "router on" not in said, said
    assert endpoint(lab.status(), FLEET) == url
    assert live(lab, "lab")[router.id].pid == router.pid
    assert ask(url).strip()  # the old endpoint answers, through the new replicas

    repaired = lab.denv("fleet", "repair", FLEET, "--host", f"{FLEET}-h0", "--grace", "1s")
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    lab.reconcile()

    assert live(lab, "lab") == {router.id: live(lab, "lab")[router.id]}  # the old replica gone
    assert live(lab, "lab")[router.id].pid == router.pid
    assert endpoint(lab.status(), FLEET) == url
    [row] = [d for d in lab.status()["deployments"] if d["fleet"] == FLEET]
    assert (row["ready"], row["replicas"], row["drift"]) == (2, 2, ""), row
    assert ask(url).strip()
