"""`denv fleet probe` and `fleet list` on a Slurm fleet: the login node, each node's scheduler
state and free GPUs (a job not of denv's holds some, a drained node is cordoned with its
reason), and denv's jobs in the queue."""

from __future__ import annotations

import json
from typing import Any

from tests.fleet.conftest import wait_for
from tests.labs.slurm_fleet import SlurmFleet

UNIT = "chat-8b.canary.hpc.aggregated-0"


def running(fleet: SlurmFleet, job: str) -> bool:
    return fleet.lab.run("squeue", "-h", "-j", job, "-o", "%T").strip() == "RUNNING"


def test_probe_and_list_show_nodes_free_gpus_and_the_queue(slurm_fleet: SlurmFleet) -> None:
    slurm_fleet.release(replicas=1)
    slurm_fleet.reconcile()
    [ours] = slurm_fleet.jobs()
    busy, drained = [n.name for n in slurm_fleet.lab.nodes if n.name != ours["nodes"]]
    foreign = slurm_fleet.lab.run(
        "sbatch", "--parsable", "--job-name", "someone-else", "--nodelist", busy,
        "--gres=gpu:2", "--time=10", "--output=/dev/null", "--wrap", "sleep 600",
    ).strip()  # fmt: skip
    wait_for(lambda: running(slurm_fleet, foreign), timeout=30, what="the foreign job running")
    slurm_fleet.lab.run(
        "scontrol", "update", f"nodename={drained}", "state=drain", "reason=disk check"
    )

    probe = slurm_fleet.denv("fleet", "probe", "hpc", "--json")
    assert probe.returncode == 0, probe.stdout + probe.stderr
    view: dict[str, Any] = json.loads(probe.stdout)["slurm"]
    assert view["login"]["host"] == "login" and view["login"]["reached"] is True
    nodes = {row["node"]: row for row in view["nodes"]}
    assert nodes[ours["nodes"]] | {"state": None} == {
        "node": ours["nodes"], "state": None, "cordoned": None, "gpus": 4, "free_gpus": 3,
        "error": None,
    }  # fmt: skip
    assert nodes[ours["nodes"]]["state"] in ("mixed", "allocated")
    assert (nodes[busy]["state"], nodes[busy]["free_gpus"], nodes[busy]["cordoned"]) == (
        "mixed", 2, None,
    )  # fmt: skip
    assert nodes[drained]["state"] == "drained"
    assert nodes[drained]["cordoned"] == "drained: disk check"
    assert nodes[drained]["free_gpus"] == 4
    assert view["queue"] == [
        {"unit": UNIT, "job": ours["job"], "state": "RUNNING", "reason": None,
         "nodes": [ours["nodes"]], "partition": "serve"},
    ]  # fmt: skip

    listed = slurm_fleet.denv("fleet", "list", "--json")  # the login node is here
    assert listed.returncode == 0, listed.stdout + listed.stderr
    [row] = [r for r in json.loads(listed.stdout)["fleets"] if r["fleet"] == "hpc"]
    assert row["slurm"] == view
    assert (row["gpus"], row["free_gpus"]) == (12, 3 + 2 - 4)  # drained: none; 4 for trials

    human = slurm_fleet.denv("fleet", "probe", "hpc")
    assert human.returncode == 0, human.stdout + human.stderr
    lines = human.stdout.splitlines()
    assert any(line.split()[:3] == ["login", "login", "node:"] for line in lines), human.stdout
    assert any("cordoned: drained: disk check" in line for line in lines), human.stdout
    job = [UNIT, ours["job"], "RUNNING", ours["nodes"], "serve"]
    assert [line.split() for line in lines if line.split()[:1] == [UNIT]] == [job], human.stdout
    listed_human = slurm_fleet.denv("fleet", "list")
    assert listed_human.returncode == 0 and "hpc: denv's jobs" in listed_human.stdout
