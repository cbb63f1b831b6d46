"""Slurm: what the agent on a cluster's login node does for the bot — submit a unit as a job,
cancel it, and report the cluster (nodes, their GPUs, denv's jobs) in one call. Every job is
named by its unit's id and carries `denv:<digest>:<token>` as its comment; the token names
the file (under $DENV_HOME/slurm, on the filesystem the nodes share) that holds the unit as
launched, which the job's tasks read (`slurm-task`) and observing joins back to the job.

A submit holds the unit's lock and asks the queue first: a job of that name on the same nodes
is the unit (the same digest: nothing to do; another: an error), so a retry, a second agent
or a bot restarted after SIGKILL never submits a duplicate.
"""

import os
import secrets
import shlex
import signal
import socket
import subprocess
import sys
import time

import units
from common import (
    HOME,
    LOGS,
    AgentError,
    agent_path,
    child_environment,
    file_lock,
    read_json,
    write_atomic,
)

SLURM = os.path.join(HOME, "slurm")
ACTIVE = ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED",
          "REQUEUE_HOLD", "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED")  # fmt: skip
JOB_FIELDS = ("job", "id", "state", "reason", "nodes", "comment", "partition", "requested",
              "started", "ended")  # fmt: skip
JOB_FORMAT = "%i|%j|%T|%r|%N|%k|%P|%n|%S|%e"
NODE_FIELDS = ("name", "address", "state", "gres", "gres_used", "partition", "reason")
NODE_FORMAT = "NodeList:|,NodeAddr:|,StateLong:|,Gres:|,GresUsed:|,Partition:|,Reason:|"
TIME_FORMAT = "%Y-%m-%dT%H:%M:%S"


def command_env():
    """What Slurm's commands and the jobs they submit get: the unit environment's names and
    the client's own SLURM_* settings (where slurm.conf is), never the bot's credentials."""
    return child_environment("scheduler")


def slurm(*argv, check=True):
    try:
        done = subprocess.run(
            list(argv), capture_output=True, text=True, env=command_env(), timeout=60
        )
    except FileNotFoundError:
        raise AgentError(f"{argv[0]} is not on PATH on the login node (Slurm's client)") from None
    except subprocess.TimeoutExpired:
        raise AgentError(f"{argv[0]} did not answer in 60 s (is slurmctld up?)") from None
    if check and done.returncode != 0:
        raise AgentError("{}: {}".format(" ".join(argv[:2]), done.stderr.strip()[-500:]))
    return done


def rows(text, fields):
    found = []
    for line in text.splitlines():
        values = line.split("|")
        if len(values) >= len(fields):
            found.append(dict(zip(fields, (v.strip() for v in values))))
    return found


def count(gres, name="gpu"):
    """GPUs in a GRES string: `gpu:4`, `gpu:h100:4(S:0-1)`, `gpu:2(IDX:0-1),shard:8`."""
    total = 0
    for item in gres.split(","):
        parts = item.split("(")[0].split(":")
        if parts[0] == name and len(parts) > 1 and parts[-1].isdigit():
            total += int(parts[-1])
    return total


def epoch(text):
    try:
        return time.mktime(time.strptime(text, TIME_FORMAT))
    except ValueError:
        return None


def queue(name=None):
    """denv's user's jobs (all states the controller still remembers), newest first."""
    argv = ["squeue", "-h", "--me", "-t", "all", "-o", JOB_FORMAT]
    if name is not None:
        argv += ["-n", name]
    jobs = [j for j in rows(slurm(*argv).stdout, JOB_FIELDS) if j["comment"].startswith("denv:")]
    return sorted(jobs, key=lambda j: -int(j["job"].split("_")[0]))


def nodes(partitions):
    """Each node once: address, state, GPUs and GPUs in use by anyone, its partitions."""
    argv = ["sinfo", "-h", "-N", "-O", NODE_FORMAT]
    if partitions:
        argv += ["-p", ",".join(partitions)]
    found = {}
    for row in rows(slurm(*argv).stdout, NODE_FIELDS):
        node = found.setdefault(
            row["name"],
            {
                "name": row["name"],
                "address": row["address"],
                "state": row["state"],
                "gpus": count(row["gres"]),
                "gpus_used": count(row["gres_used"]),
                "partitions": [],
                "reason": None if row["reason"] in ("none", "") else row["reason"],
            },
        )
        node["partitions"].append(row["partition"].rstrip("*"))
    return sorted(found.values(), key=lambda n: n["name"])


def record(job):
    """A job as a unit record: the unit as launched (its file) and the queue's view of it."""
    _, digest, token = ([*job["comment"].split(":"), "", ""])[:3]
    launched = read_json(os.path.join(SLURM, token + ".json")) or {}
    unit = launched.get("unit", {})
    running = job["state"] == "RUNNING"
    ended = job["state"] not in ACTIVE
    return {
        "id": job["id"],
        "digest": digest,
        "argv": unit.get("argv", []),
        "port": unit.get("port"),
        "gpus": unit.get("gpus", []),
        "labels": unit.get("labels", {}),
        "env": unit.get("env", {}),
        "log": os.path.join(LOGS, job["id"] + ".log"),
        "alive": running,
        "started_at": epoch(job["started"]) if job["state"] != "PENDING" else None,
        "exited_at": epoch(job["ended"]) if ended else None,
        "job": job["job"],
        "queue": job["state"],
        "queue_reason": None if job["reason"] in ("None", "") else job["reason"],
        "nodes": launched.get("nodes") or ([job["requested"]] if job["requested"] else []),
        "partition": job["partition"],
    }


def observe(request):
    """The cluster in one call: its nodes and denv's jobs as unit records; the files of jobs
    the controller no longer remembers are removed."""
    jobs = queue()
    records, seen = [], set()
    for job in jobs:  # newest first: of one unit on one node, the newest job says
        found = record(job)
        where = (found["id"], tuple(found["nodes"]))
        newer = found["exited_at"] is not None and found["id"] in {r["id"] for r in records}
        if where in seen or newer:  # an ended job of a unit that was submitted again
            continue
        seen.add(where)
        records.append(found)
    forget({j["comment"].split(":")[2] for j in jobs if j["comment"].count(":") == 2})
    return {"nodes": nodes(request.get("partitions") or []), "jobs": records}


def forget(tokens):
    """Remove launch files no remembered job names (older than a minute: a submit in flight
    writes its file before the job exists)."""
    if not os.path.isdir(SLURM):
        return
    for name in os.listdir(SLURM):
        path = os.path.join(SLURM, name)
        unnamed = name.endswith(".json") and name[:-5] not in tokens
        if unnamed and time.time() - os.path.getmtime(path) > 60:
            os.unlink(path)


def submit(request):
    """Submit the unit as one job over its nodes, unless a job of it runs or waits there."""
    unit = request["unit"]
    with file_lock(SLURM, unit["id"]):
        for job in queue(unit["id"]):
            if job["state"] not in ACTIVE:
                continue
            found = record(job)
            if found["nodes"] == request["nodes"]:
                if found["digest"] != unit["digest"] and job["state"] == "PENDING":
                    slurm("scancel", job["job"])  # not started yet: the new spec takes its turn
                    continue
                if found["digest"] != unit["digest"]:
                    raise AgentError(
                        "unit {} runs another spec as job {} ({}); stop it first".format(
                            unit["id"], job["job"], found["digest"]
                        )
                    )
                found["changed"] = False
                return found
        token = secrets.token_hex(8)
        path = os.path.join(SLURM, token + ".json")
        write_atomic(path, {"unit": unit, "nodes": request["nodes"]})
        os.makedirs(LOGS, exist_ok=True)
        task = [request["python"], agent_path(), "slurm-task", path]
        step = ["srun", "--kill-on-bad-exit=1", "--wait=30", "--ntasks-per-node=1"]
        argv = ["sbatch", "--parsable", "--no-requeue", "--export=ALL"]
        comment = "denv:{}:{}".format(unit["digest"], token)
        argv += ["--job-name", unit["id"], "--comment", comment]
        argv += ["--partition", request["partition"], "--nodes", str(len(request["nodes"]))]
        argv += ["--nodelist", ",".join(request["nodes"]), "--ntasks-per-node", "1"]
        argv += ["--output", os.path.join(LOGS, unit["id"] + ".log"), "--open-mode", "append"]
        for flag in ("account", "qos", "time"):
            if request.get(flag):
                argv += ["--" + flag, request[flag]]
        gpus = len(unit.get("gpus") or [])
        if gpus:
            per_node = request.get("gpu_request") == "gpus"
            argv.append(f"--gpus-per-node={gpus}" if per_node else f"--gres=gpu:{gpus}")
        argv += ["--wrap", "exec " + " ".join(shlex.quote(a) for a in step + task)]
        job = slurm(*argv).stdout.strip().split(";")[0]
        submitted = dict.fromkeys(JOB_FIELDS, "")
        submitted.update(
            job=job,
            id=unit["id"],
            state="PENDING",
            comment=comment,
            partition=request["partition"],
            requested=",".join(request["nodes"]),
        )
        return {**record(submitted), "changed": True}


def cancel(request):
    """scancel the unit's active jobs (those whose first node is `host`, when given), then
    wait up to `grace` seconds (and Slurm's KillWait) for them to leave the active states."""
    unit_id, head, grace = request["id"], request.get("host"), float(request.get("grace", 10))
    with file_lock(SLURM, unit_id):
        mine = [
            j for j in queue(unit_id)
            if j["state"] in ACTIVE and (not head or record(j)["nodes"][:1] == [head])
        ]  # fmt: skip
        if not mine:
            return {"id": unit_id, "stopped": False, "jobs": []}
        ids = [j["job"] for j in mine]
        slurm("scancel", *ids)
        deadline = time.time() + grace + 30
        while time.time() < deadline:
            left = [j for j in queue(unit_id) if j["job"] in ids and j["state"] in ACTIVE]
            if not left:
                return {"id": unit_id, "stopped": True, "jobs": ids}
            time.sleep(0.2)
        raise AgentError(
            "unit {}: jobs {} still active {:.0f} s after scancel".format(
                unit_id, ",".join(ids), grace + 30
            )
        )


def logs(unit_id, tail):
    path = os.path.join(LOGS, unit_id + ".log")
    lines, error = units.tail_lines(path, tail)
    return {"id": unit_id, "lines": lines, "log": path, "log_error": error}


def task(path):
    """One task of a unit's job, on its node: the rank and the master from Slurm, then this
    node's process of the replica — node 0's the unit's argv, another node its own from
    `node_argv` — or, for a unit that is one process for the whole replica (the simulator),
    nothing: the node holds its GPUs for it until the job ends."""
    launched = read_json(path)
    if launched is None:
        raise AgentError(f"no launch file {path}")
    unit, hosts = launched["unit"], launched.get("nodes") or []
    here = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    rank = int(os.environ.get("SLURM_NODEID", "0"))
    size = int(os.environ.get("SLURM_JOB_NUM_NODES") or os.environ.get("SLURM_NNODES") or "1")
    names = slurm("scontrol", "show", "hostnames", os.environ.get("SLURM_JOB_NODELIST", ""))
    master = (names.stdout.split() or [here])[0]
    address = master_address(master)
    print(f"denv: node rank {rank} of {size} on {here}, master {master} at {address}", flush=True)
    others = unit.get("node_argv") or {}
    if here in others:
        argv = others[here]
    elif hosts[:1] == [here] or (here not in hosts and rank == 0):
        argv = unit["argv"]
    else:
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        while True:
            signal.pause()
    env = child_environment("engine", unit.get("env", {}))
    if "CUDA_VISIBLE_DEVICES" in os.environ:  # the GPUs Slurm gave this job win
        env["CUDA_VISIBLE_DEVICES"] = os.environ["CUDA_VISIBLE_DEVICES"]
    env.update({"DENV_NODE_RANK": str(rank), "DENV_NNODES": str(size),
                "DENV_MASTER_ADDR": address})  # fmt: skip
    os.chdir(unit.get("cwd") or HOME)
    os.execvpe(argv[0], argv, env)


def master_address(name):
    found = slurm("scontrol", "-o", "show", "node", name, check=False).stdout
    for item in found.split():
        if item.startswith("NodeAddr="):
            return item.split("=", 1)[1]
    return name


def main(verb, args, payload):
    if verb == "slurm-observe":
        return observe(payload())
    if verb == "slurm-submit":
        return submit(payload())
    if verb == "slurm-cancel":
        return cancel(payload())
    if verb == "slurm-logs":
        return logs(args[0], int(args[1]) if len(args) > 1 else 100)
    if verb == "slurm-task":
        task(args[0])
        return None
    raise AgentError(f"unknown verb {verb!r}")
