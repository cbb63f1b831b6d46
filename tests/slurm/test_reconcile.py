"""`denv reconcile` on a Slurm fleet, end to end: the lab's real slurmctld and slurmd nodes,
simulator engines as jobs, the real sglang-router on the login node, the official openai
client through the endpoint."""

from __future__ import annotations

from tests.e2e.load import ask, light_load
from tests.fleet.conftest import wait_for
from tests.labs.slurm_fleet import SlurmFleet


def endpoint(status: dict[str, object]) -> str:
    [row] = status["deployments"]  # type: ignore[index]
    return f"{row['endpoint']}/v1"  # type: ignore[index]


def converged(fleet: SlurmFleet, replicas: int) -> list[dict[str, str]]:
    """Status: every replica ready, no drift; one running job per replica, each named by its
    unit, no name twice."""
    status = fleet.status()
    [row] = status["deployments"]
    assert (row["ready"], row["replicas"], row["drift"]) == (replicas, replicas, ""), fleet.denv(
        "plan"
    ).stdout
    jobs = fleet.jobs()
    assert len(jobs) == replicas and all(j["state"] == "RUNNING" for j in jobs), jobs
    assert len({j["name"] for j in jobs}) == replicas, jobs
    return jobs


def test_jobs_deployed_cancelled_outside_denv_and_drained(slurm_fleet: SlurmFleet) -> None:
    """Two replicas as jobs named by their units, in partition serve, behind the router on
    the login node; a job scancelled outside denv is submitted again, the pass says why; a
    node drained has its replica moved to another node, the endpoint answering."""
    slurm_fleet.release(replicas=2)
    slurm_fleet.reconcile()
    jobs = converged(slurm_fleet, 2)
    assert {j["partition"] for j in jobs} == {"serve"}
    assert sorted(j["name"] for j in jobs) == [
        "chat-8b.canary.hpc.aggregated-0",
        "chat-8b.canary.hpc.aggregated-1",
    ]
    assert ask(endpoint(slurm_fleet.status())).strip()
    logs = slurm_fleet.denv("fleet", "logs", "hpc", jobs[0]["name"], "--json")
    assert logs.returncode == 0, logs.stdout + logs.stderr
    assert "denv: node rank 0 of 1" in logs.stdout

    cancelled = jobs[0]
    slurm_fleet.lab.run("scancel", cancelled["job"])
    wait_for(lambda: len(slurm_fleet.jobs()) == 1, timeout=60, what="the job cancelled")
    again = slurm_fleet.reconcile()
    why = f"job {cancelled['job']} ended: CANCELLED; start it again"
    assert f"resubmitted: {cancelled['name']} ({why})" in again.stdout, again.stdout
    jobs = converged(slurm_fleet, 2)
    [new] = [j for j in jobs if j["name"] == cancelled["name"]]
    assert new["job"] != cancelled["job"]

    node = jobs[0]["nodes"]
    slurm_fleet.lab.run("scontrol", "update", f"nodename={node}", "state=drain", "reason=test")
    slurm_fleet.reconcile()
    moved = converged(slurm_fleet, 2)
    assert node not in {j["nodes"] for j in moved}, moved
    assert ask(endpoint(slurm_fleet.status())).strip()


def test_sigkill_after_a_submit_leaves_no_duplicate(slurm_fleet: SlurmFleet) -> None:
    slurm_fleet.release(replicas=2)
    killed = slurm_fleet.reconcile(fault="launched", ok=False)
    assert killed.returncode == -9, killed.stdout + killed.stderr
    slurm_fleet.reconcile()
    converged(slurm_fleet, 2)


def test_a_roll_loses_no_request(slurm_fleet: SlurmFleet) -> None:
    slurm_fleet.release(replicas=1, batch=128)
    slurm_fleet.reconcile()
    url = endpoint(slurm_fleet.status())
    [before] = converged(slurm_fleet, 1)
    with light_load(url) as load:
        load.more(3, "traffic before the roll")
        slurm_fleet.release(replicas=1, batch=64)
        rolled = slurm_fleet.reconcile()
        load.more(3, "traffic after the roll")
    assert "+ surge" in rolled.stderr, rolled.stderr
    assert load.failed == []
    [after] = converged(slurm_fleet, 1)
    assert after["job"] != before["job"]


def test_a_two_node_replica_takes_its_rank_and_master_from_slurm(
    slurm_fleet: SlurmFleet,
) -> None:
    lab = slurm_fleet.lab
    from tests.labs.slurm_fleet import fleet_file

    slurm_fleet.repo.write("fleets/hpc.yaml", fleet_file(lab, trial_gpus=0, rack=("n1", "n2")))
    slurm_fleet.release(replicas=1, gpus=8)
    slurm_fleet.reconcile()
    [job] = converged(slurm_fleet, 1)
    assert job["nodes"] == "n[1-2]", job
    logs = slurm_fleet.denv("fleet", "logs", "hpc", job["name"])
    ranks = sorted(line for line in logs.stdout.splitlines() if "node rank" in line)
    master = lab.node("n1").address
    assert len(ranks) == 2, logs.stdout
    assert "node rank 0 of 2 on n1" in ranks[0] and f"master n1 at {master}" in ranks[0]
    assert "node rank 1 of 2 on n2" in ranks[1] and f"master n1 at {master}" in ranks[1]
    assert ask(endpoint(slurm_fleet.status())).strip()


def test_a_job_the_queue_holds_is_pending_with_slurms_reason(slurm_fleet: SlurmFleet) -> None:
    """A reservation holds every node (sinfo still shows their GPUs free): the job is
    submitted, the pass says it is pending and why, status and plan show it; once the
    reservation goes, Slurm starts it and the next pass finds the replica ready."""
    lab = slurm_fleet.lab
    hold = ("reservationname=hold", "starttime=now", "duration=10", "users=root", "nodes=ALL")
    lab.run("scontrol", "create", "reservation", *hold)
    slurm_fleet.release(replicas=1)
    waited = slurm_fleet.reconcile()
    assert "pending (ReqNodeNotAvail, Reserved for maintenance)" in waited.stdout, waited.stdout
    [row] = slurm_fleet.status()["deployments"]
    assert row["queued"] == {
        "chat-8b.canary.hpc.aggregated-0": "ReqNodeNotAvail, Reserved for maintenance"
    }
    assert row["drift"] == "pending 1"
    shown = slurm_fleet.denv("plan").stdout
    assert "… chat-8b.canary.hpc.aggregated-0" in shown and "pending: ReqNodeNotAvail" in shown
    [job] = slurm_fleet.jobs()
    lab.run("scontrol", "delete", "reservationname=hold")
    wait_for(lambda: slurm_fleet.jobs()[0]["state"] == "RUNNING", timeout=60, what="the job")
    slurm_fleet.reconcile()
    [running] = converged(slurm_fleet, 1)
    assert running["job"] == job["job"]  # the same job: nothing was submitted twice
