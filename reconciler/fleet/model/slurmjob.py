"""Pure logic: the job a Slurm fleet asks the scheduler for, for one unit — its partition,
QOS, account, time limit and GPU request, as the driver sends it to the login node's agent
(`slurm-submit`) and as `denv recipe render` shows it (`sbatch_line`).

The agent spells the request as sbatch's options (reconciler/fleet/host/slurm.py, `submit`);
`sbatch_line` spells it the same way, less what only the agent knows (the job's comment
token, the log file, the interpreter that runs the task).
"""

from __future__ import annotations

from typing import Any

from reconciler.spec.kindsettings import SlurmSettings


def job_request(settings: SlurmSettings, nodes: list[str], trial: bool) -> dict[str, Any]:
    """What a unit on `nodes` asks of Slurm: bench runs and optimizer trials (`trial`) take
    the trial partition, QOS and time limit where the fleet file names them."""
    return {
        "nodes": nodes,
        "partition": (settings.trial_partition if trial else None) or settings.partition,
        "qos": (settings.trial_qos if trial else None) or settings.qos,
        "account": settings.account,
        "time": settings.trial_time_limit if trial else settings.time_limit,
        "gpu_request": settings.gpu_request,
    }


def sbatch_line(request: dict[str, Any], job_name: str, gpus: int) -> list[str]:
    """The sbatch command the agent runs for `request` (`job_request`), `gpus` per node; the
    time limit is the partition's default where the fleet file sets none."""
    nodes = request["nodes"]
    argv = ["sbatch", "--job-name", job_name, "--partition", request["partition"]]
    argv += ["--nodes", str(len(nodes)), "--nodelist", ",".join(nodes), "--ntasks-per-node", "1"]
    for flag in ("account", "qos", "time"):
        if request.get(flag):
            argv += ["--" + flag, request[flag]]
    if gpus:
        per_node = request["gpu_request"] == "gpus"
        argv.append(f"--gpus-per-node={gpus}" if per_node else f"--gres=gpu:{gpus}")
    return argv
