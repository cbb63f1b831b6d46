"""The Slurm driver on the lab, below the reconciler: a replica over two nodes whose
processes differ (a real engine's node 0 and node 1) is one job; each node's task runs its own
process, and both tasks take their rank and master from Slurm."""

from __future__ import annotations

import sys
from pathlib import Path

from reconciler.fleet.drivers.slurm import SlurmDriver
from reconciler.spec.fleet import Fleet
from tests.fleet.conftest import wait_for
from tests.labs.slurm import SlurmLab


def test_one_job_runs_each_nodes_own_process(slurm_lab: SlurmLab, tmp_path: Path) -> None:
    hosts = [{"name": "login", "address": slurm_lab.controller_address, "gpus": 0}]
    hosts += [{"name": n.name, "address": n.address, "gpus": 4} for n in slurm_lab.nodes]
    fleet = Fleet.model_validate(
        {"name": "hpc", "provider": "test", "hardware": "h200", "python": sys.executable,
         "transport": "slurm", "slurm": {"partition": "serve"}, "hosts": hosts}
    )  # fmt: skip
    driver = SlurmDriver(fleet, env={**slurm_lab.env, "DENV_HOME": str(tmp_path / "home")})
    unit = {
        "id": "r.s.hpc.aggregated-0",
        "digest": "d1",
        "argv": ["sh", "-c", "echo process of node 0 on $DENV_MASTER_ADDR; exec sleep 300"],
        "node_argv": {
            "n3": ["sh", "-c", "echo process of node 1, rank $DENV_NODE_RANK; exec sleep 300"]
        },
        "hosts": ["n2", "n3"],
        "env": {},
        "gpus": [0, 1],
        "labels": {"release": "r", "stage": "s", "fleet": "hpc"},
    }
    try:
        driver.launch("n2", unit)

        def lines() -> list[str]:
            return list(driver.logs("n2", unit["id"])["lines"])

        wait_for(lambda: len(lines()) == 4, timeout=60, what="both tasks' lines")
        [record] = driver.units("n2")
        assert (record.nodes, record.queue, record.alive) == (("n2", "n3"), "RUNNING", True)
        master = slurm_lab.node("n2").address
        assert sorted(lines()) == [
            f"denv: node rank 0 of 2 on n2, master n2 at {master}",
            f"denv: node rank 1 of 2 on n3, master n2 at {master}",
            "process of node 0 on " + master,
            "process of node 1, rank 1",
        ]
        seen = driver.observe(None)
        assert [u.id for u in seen.hosts["n2"].units] == [unit["id"]]
        assert seen.hosts["n3"].units == ()  # reported on its first node only
        driver.stop("n2", unit["id"], grace=1)
        assert not [r for r in driver.units("n2") if r.alive or r.pending]
    finally:
        driver.close()


def test_a_fleet_agent_home_holds_the_jobs_files_and_reaches_their_tasks(
    slurm_lab: SlurmLab, tmp_path: Path
) -> None:
    scratch = tmp_path / "scratch" / "denv"  # agent_home: not the login user's ~/.denv
    hosts = [{"name": "login", "address": slurm_lab.controller_address, "gpus": 0}]
    hosts += [{"name": n.name, "address": n.address, "gpus": 4} for n in slurm_lab.nodes]
    fleet = Fleet.model_validate(
        {"name": "hpc", "provider": "test", "hardware": "h200", "python": sys.executable,
         "transport": "slurm", "slurm": {"partition": "serve"}, "hosts": hosts,
         "agent_home": str(scratch)}
    )  # fmt: skip
    driver = SlurmDriver(fleet, env={**slurm_lab.env, "DENV_HOME": str(tmp_path / "home")})
    unit = {
        "id": "r.s.hpc.aggregated-0",
        "digest": "d1",
        "argv": ["sh", "-c", "echo home $DENV_HOME; exec sleep 300"],
        "env": {},
        "gpus": [0],
        "labels": {"release": "r", "stage": "s", "fleet": "hpc"},
    }
    try:
        driver.launch("n1", unit)
        log = scratch / "logs" / f"{unit['id']}.log"
        wait_for(lambda: f"home {scratch}" in driver.logs("n1", unit["id"])["lines"], timeout=60,
                 what="the task's line")  # fmt: skip
        assert log.is_file() and list((scratch / "slurm").glob("*.json"))
        assert not (tmp_path / "home").exists()
        assert driver.default_home() == str(scratch)
        driver.stop("n1", unit["id"], grace=1)
    finally:
        driver.close()
