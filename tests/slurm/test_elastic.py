"""Elastic stages on a Slurm fleet, end to end: scaling up submits a job per new replica,
scaling down cancels jobs; a job the scheduler holds is pending — shown, never counted as
serving, given up as soon as the load falls. The lab's real slurmctld and slurmd nodes,
simulator engines as jobs, the real sglang-router on the login node, the official openai
client through the endpoint."""

from __future__ import annotations

from tests.e2e.load import light_load
from tests.fleet.conftest import wait_for
from tests.labs.elastic import decisions, elastic_release, passes, row, tolerate_a_short_queue
from tests.labs.operated import actions_done
from tests.labs.slurm_fleet import SlurmFleet, fleet_file
from tests.slurm.test_reconcile import endpoint

ENGINE = "chat-8b.canary.hpc.aggregated-"


def states(fleet: SlurmFleet) -> dict[str, str]:
    """Each replica's job in the queue (pending, running, ending): name -> state."""
    return {j["name"]: j["state"] for j in fleet.jobs()}


def test_jobs_follow_the_load_and_a_held_one_is_pending_then_cancelled(
    slurm_fleet: SlurmFleet,
) -> None:
    """A replica is a whole node (4 GPUs); trials keep none. Under load the second replica
    is a job that runs (the bot killed right after submitting it; the next one carries on);
    the third's node is reserved, so its job waits in the queue: pending,
    not ready, the stage serving. When the load falls the pending job is cancelled first,
    with the first step down, then a running one, drained; the ended jobs the queue still
    remembers are no replicas (status counts one, the next pass submits nothing)."""
    fleet, lab = slurm_fleet, slurm_fleet.lab
    fleet.repo.write("fleets/hpc.yaml", fleet_file(lab, trial_gpus=0))
    elastic_release(fleet.repo, "hpc", gpus=4)
    fleet.reconcile()
    url = endpoint(fleet.status())
    with light_load(url, workers=8, max_tokens=64) as heavy:
        heavy.more(8, "traffic on one replica")
        killed = fleet.reconcile(fault="launched", ok=False)  # the bot dies mid-scale
        assert killed.returncode == -9, killed.stdout + killed.stderr
        assert decisions([killed]) == [(1, 2)], killed.stdout + killed.stderr
        running = {ENGINE + "0": "RUNNING", ENGINE + "1": "RUNNING"}
        wait_for(lambda: states(fleet) == running, timeout=60, what="the new replica's job")
        taken = {j["nodes"] for j in fleet.jobs()}
        [free] = [n.name for n in lab.nodes if n.name not in taken]
        hold = ("reservationname=hold", "starttime=now", "duration=10", "users=root")
        lab.run("scontrol", "create", "reservation", *hold, f"nodes={free}")
        held = fleet.reconcile()
        heavy.more(8, "traffic while a replica is pending")
    # the next bot read two replicas from the queue: it submitted none twice, joined the
    # killed bot's replica to the router, and asked for a third
    assert decisions([held]) == [(2, 3)], held.stdout + held.stderr
    assert {"router-add": 1, "submit": 1}.items() <= actions_done(held.stdout).items()
    assert states(fleet)[ENGINE + "2"] == "PENDING"
    shown = row(fleet.status(), "hpc")
    assert (shown["ready"], list(shown["queued"])) == (2, [ENGINE + "2"]), shown
    assert f"… {ENGINE}2" in fleet.denv("plan").stdout
    assert heavy.failed == []

    two = {ENGINE + "0": "RUNNING", ENGINE + "1": "RUNNING"}
    calmed = passes(fleet, lambda: states(fleet) == two, most=4)  # the down delay (1s), then
    calm = calmed[-1]  # the first step down: the pending job
    assert decisions(calmed) == [(3, 2)], [r.stdout + r.stderr for r in calmed]
    assert "pending given up" in calm.stdout + calm.stderr
    assert actions_done(calm.stdout) == {"stop": 1}  # scancel; nothing to drain: it never ran
    assert states(fleet) == {ENGINE + "0": "RUNNING", ENGINE + "1": "RUNNING"}
    tolerate_a_short_queue(fleet.repo)  # calm traffic: a moment's queue asks for nothing
    with light_load(url, workers=2, max_tokens=64) as light:
        light.more(4, "traffic on two replicas, calm")
        down = passes(fleet, lambda: len(fleet.jobs()) == 1, most=4)
        light.more(4, "traffic on one replica")
    assert decisions(down) == [(2, 1)], [r.stdout + r.stderr for r in down]
    assert sum(actions_done(r.stdout).get("drain", 0) for r in down) == 1
    assert light.failed == []
    ended = [j["name"] for j in fleet.jobs(active=False) if j["state"] == "CANCELLED"]
    assert ENGINE + "1" in ended, ended  # the queue remembers it (the lab's MinJobAge: 30 s)
    last = row(fleet.status(), "hpc")
    assert (last["replicas"], last["ready"], last["drift"]) == (1, 1, ""), last
    again = fleet.reconcile()
    assert actions_done(again.stdout) == {}, again.stdout + again.stderr
    assert list(states(fleet)) == [ENGINE + "0"]
