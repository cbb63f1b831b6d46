"""The Slurm test cluster itself: nodes with GPUs come up, jobs run on the nodes (in their
namespaces) and end by scancel, a two-node job gets its ranks and master from Slurm."""

from __future__ import annotations

from pathlib import Path

from tests.fleet.conftest import wait_for
from tests.labs.slurm import GPUS_PER_NODE, SlurmLab


def queue(lab: SlurmLab) -> list[dict[str, str]]:
    out = lab.run("squeue", "-h", "-o", "%i|%j|%T|%N")
    keys = ("id", "name", "state", "nodes")
    return [dict(zip(keys, line.split("|"), strict=True)) for line in out.splitlines()]


def alive(pid: str) -> bool:
    """Running, not a zombie (slurmstepd, reparented, is reaped by whoever adopted it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def test_three_idle_nodes_with_four_gpus_each_in_both_partitions(slurm_lab: SlurmLab) -> None:
    rows = slurm_lab.sinfo()

    assert {(row["node"], row["partition"]) for row in rows} == {
        (node, partition) for node in ("n1", "n2", "n3") for partition in ("serve*", "trial")
    }
    assert {row["state"] for row in rows} == {"idle"}
    assert {row["gres"] for row in rows} == {f"gpu:{GPUS_PER_NODE}"}


def test_a_gpu_job_runs_on_one_node_in_its_namespace_until_scancel(
    slurm_lab: SlurmLab, tmp_path: Path
) -> None:
    output = tmp_path / "job.out"
    slurm_lab.run(
        "sbatch", "--gres=gpu:2", "-p", "serve", "--job-name", "X", "-o", str(output),
        "--wrap", "echo $SLURM_JOB_NODELIST $SLURM_JOB_GPUS $(hostname -I); sleep 300",
    )  # fmt: skip

    wait_for(lambda: [j["state"] for j in queue(slurm_lab)] == ["RUNNING"], 30, "X running")
    wait_for(lambda: output.exists() and output.read_text().endswith("\n"), 30, "its line")
    node, gpus, address = output.read_text().split()
    assert queue(slurm_lab)[0]["nodes"] == node
    assert len(gpus.split(",")) == 2
    assert address == slurm_lab.node(node).address  # slurmd forked it in its namespace

    slurm_lab.run("scancel", "--name", "X")
    wait_for(lambda: not queue(slurm_lab), 30, "X gone from the queue")


def test_a_two_node_job_gets_its_node_ranks_and_master_from_slurm(
    slurm_lab: SlurmLab, tmp_path: Path
) -> None:
    output = tmp_path / "job.out"
    step = "echo $SLURM_NODEID $(scontrol show hostnames $SLURM_JOB_NODELIST | head -n 1)"
    slurm_lab.run(
        "sbatch", "-N", "2", "--gres=gpu:1", "-p", "trial", "-o", str(output),
        "--wrap", f"srun bash -c '{step} $(hostname -I)'",
    )  # fmt: skip

    wait_for(lambda: not queue(slurm_lab), 30, "the job done")
    lines = sorted(line.split() for line in output.read_text().splitlines())
    assert [rank for rank, _, _ in lines] == ["0", "1"]
    master = {name for _, name, _ in lines}
    assert len(master) == 1
    # rank 0 runs on the master, at the master's own address
    assert lines[0][2] == slurm_lab.node(master.pop()).address
    assert lines[0][2] != lines[1][2]


def test_stop_leaves_no_daemon_job_namespace_or_link(slurm_lab: SlurmLab, tmp_path: Path) -> None:
    output = tmp_path / "job.out"
    slurm_lab.run("sbatch", "-o", str(output), "--wrap", "echo started; sleep 300")
    wait_for(lambda: output.exists() and output.read_text() == "started\n", 30, "the job")
    namespaces = list(slurm_lab.namespaces)
    node = slurm_lab.node(queue(slurm_lab)[0]["nodes"])
    pids = slurm_lab.run("ip", "netns", "pids", node.namespace).split()  # slurmd, slurmstepd, job
    daemons = list(slurm_lab.processes)

    slurm_lab.stop()

    assert all(process.poll() is not None for process in daemons)
    assert len(pids) >= 3 and not any(alive(pid) for pid in pids)
    assert not set(namespaces) & set(slurm_lab.run("ip", "netns", "list").split())
    assert f"dsb{slurm_lab.tag}" not in slurm_lab.run("ip", "-br", "link")
