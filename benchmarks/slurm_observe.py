"""Time to observe a Slurm fleet of the test cluster's size, per pass and per job, against an
operator's script that asks Slurm once per job, in the same run; and time to plan a release on it.

    .venv/bin/python benchmarks/slurm_observe.py [--jobs 0,4,12] [--repeats 30] [--replicas 8]
        [--plan-repeats 20] [--json]

The cluster is the tests' (tests/labs/slurm.py: a real slurmctld, three slurmd nodes of 4 GPUs in
network namespaces on this machine) and the fleet tests/labs/slurm_fleet.py's `hpc` (the login
node is this machine; its agent is local). At each jobs point, denv's jobs are that many units
launched through the driver (`SlurmDriver.launch`: sbatch on the login node), a `sleep` of one
GPU each, four to a node; the point is timed once every one of them runs, after 3 untimed
rounds. The peers, each once per repeat, interleaved:

- driver: `Drivers().get(fleet).observe(None)` on a kept agent — one agent call that runs squeue
  and sinfo on the login node, beside the login node's probe;
- floor: the same squeue and sinfo as the agent runs them, straight from this process;
- squeue_each: an operator's script, one `squeue -j <id>` per job, then sinfo;
- scontrol_each: the same with `scontrol show job <id>` per job;
- and, to say where the driver's time goes, its two calls each alone: slurm_call (the agent's
  slurm-observe: squeue and sinfo) and login_probe (the login node's GPUs, units and ports).

Plan: this repository's catalog and recipes with the fleet and one release of --replicas
one-GPU replicas; `desired_units` and `plan()` (reconciler.reconcile) for a fresh deploy on
the cluster as the driver observed it with no job, and for the steady state (every unit
reported running; a running loop's DesiredMemo), as benchmarks/plan_scale.py times them.

`--json` prints one object: `observe`, a list of one object per jobs point (`jobs`, and for
each peer and part `<peer>_s`, the median seconds per pass; `<peer>_per_job_s`, that over the jobs;
`<peer>_added_per_job_s`, what a job adds, (pass - pass at 0 jobs) / jobs; both null at 0
jobs, the latter also without a 0 point), `plan` (`units`, `replicas`, `desired_fresh_s`,
`plan_fresh_s`, `desired_steady_s`, `plan_steady_s`, `counts`: started, kept), `repeats`,
`plan_repeats`, `cores`, `load_average` (1-minute, before and after). The lab is stopped at
the end, also after a failure.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from reconciler.fleet.drivers.agent import simulated_gpus  # noqa: E402
from reconciler.fleet.drivers.registry import Drivers, rules_of  # noqa: E402
from reconciler.fleet.drivers.slurm import SlurmDriver  # noqa: E402
from reconciler.fleet.model.observed import FleetObservation, UnitRecord  # noqa: E402
from reconciler.reconcile.desired import (  # noqa: E402
    Desired,
    DesiredMemo,
    desired_units,
    observed_units,
)
from reconciler.reconcile.plan import plan  # noqa: E402
from reconciler.reconcile.revisions import StageRevision, Stages  # noqa: E402
from reconciler.spec.fleet import Fleet, FleetFile  # noqa: E402
from reconciler.spec.loader import open_repo  # noqa: E402
from reconciler.spec.release import Release  # noqa: E402
from tests.labs.slurm import GPUS_PER_NODE, SlurmLab, installed  # noqa: E402
from tests.labs.slurm_fleet import fleet_file, release_text  # noqa: E402

PEERS = ("driver", "floor", "squeue_each", "scontrol_each")
PARTS = ("slurm_call", "login_probe")  # the driver's two calls, each alone
# rounds of every peer, untimed, before each point's: the jobs just started (each job's task is
# a Python process that execs the unit) and the lab's daemons settle
WARMUP = 3
HEAD = "0" * 40
# what the agent asks Slurm (reconciler/fleet/host/slurm.py's JOB_FORMAT and NODE_FORMAT)
JOB_FORMAT = "%i|%j|%T|%r|%N|%k|%P|%n|%S|%e"
NODE_FORMAT = "NodeList:|,NodeAddr:|,StateLong:|,Gres:|,GresUsed:|,Partition:|,Reason:|"
SINFO = ("sinfo", "-h", "-N", "-O", NODE_FORMAT, "-p", "serve,trial")


# --- the fleet and its jobs -----------------------------------------------------------------


def lab_fleet(lab: SlurmLab) -> Fleet:
    return FleetFile.model_validate(YAML(typ="safe").load(fleet_file(lab))).fleet


def unit(index: int, node: str) -> dict[str, Any]:
    """A placeholder unit of one GPU: a long `sleep`, labelled as a release's (partition serve)."""
    return {
        "id": f"bench-{index:03d}",
        "digest": f"{index:016x}",
        "argv": ["sleep", "3600"],
        "env": {},
        "port": None,
        "gpus": [index % GPUS_PER_NODE],
        "labels": {"release": "bench"},
        "hosts": [node],
    }


def launch(driver: SlurmDriver, lab: SlurmLab, first: int, last: int) -> list[str]:
    """Jobs `first`..`last - 1` submitted through the driver, four to a node; their job ids."""
    jobs = []
    for index in range(first, last):
        node = lab.nodes[index // GPUS_PER_NODE].name
        jobs.append(driver.launch(node, unit(index, node)).job or "")
    return jobs


def wait_running(driver: SlurmDriver, count: int, timeout: float = 120.0) -> None:
    """Until the queue shows `count` of denv's jobs, every one RUNNING."""
    deadline = time.monotonic() + timeout
    states: list[str | None] = []
    while time.monotonic() < deadline:
        states = [job.queue for job in driver.cluster().jobs]
        if len(states) == count and all(s == "RUNNING" for s in states):
            return
        time.sleep(0.2)
    raise RuntimeError(f"waited {timeout:.0f} s for {count} jobs to run; the queue: {states}")


# --- the peers ------------------------------------------------------------------------------


def slurm(lab: SlurmLab, *argv: str) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, env=lab.env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip()}")
    return done.stdout


def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def observe(driver: SlurmDriver, jobs: int) -> None:
    seen = driver.observe(None)
    assert not seen.errors, seen.errors
    found = [u for h in seen.hosts.values() for u in h.units if u.job]
    assert len(found) == jobs and all(u.alive for u in found), found


def floor(lab: SlurmLab, jobs: int) -> None:
    queue = slurm(lab, "squeue", "-h", "--me", "-t", "all", "-o", JOB_FORMAT)
    assert len(queue.splitlines()) == jobs, queue
    assert slurm(lab, *SINFO)


def squeue_each(lab: SlurmLab, ids: list[str]) -> None:
    for job in ids:
        assert "|RUNNING|" in slurm(lab, "squeue", "-h", "-j", job, "-o", JOB_FORMAT)
    assert slurm(lab, *SINFO)


def scontrol_each(lab: SlurmLab, ids: list[str]) -> None:
    for job in ids:
        assert "JobState=RUNNING" in slurm(lab, "scontrol", "show", "job", job)
    assert slurm(lab, *SINFO)


def measure_observe(
    driver: SlurmDriver, lab: SlurmLab, ids: list[str], repeats: int
) -> dict[str, Any]:
    jobs = len(ids)
    timers: dict[str, Callable[[], object]] = {
        "driver": lambda: observe(driver, jobs),
        "floor": lambda: floor(lab, jobs),
        "squeue_each": lambda: squeue_each(lab, ids),
        "scontrol_each": lambda: scontrol_each(lab, ids),
    }
    login = next(host for host in driver.fleet.hosts if host.gpus == 0)
    declared = simulated_gpus(driver.fleet, login, None)
    timers["slurm_call"] = lambda: driver.cluster()
    timers["login_probe"] = lambda: driver.agent(login.name).probe(declared)
    figures: dict[str, list[float]] = {peer: [] for peer in PEERS + PARTS}
    for round_ in range(WARMUP + repeats):
        for peer in PEERS + PARTS:
            elapsed = timed(timers[peer])
            if round_ >= WARMUP:
                figures[peer].append(elapsed)
    row: dict[str, Any] = {"jobs": jobs}
    for peer in PEERS + PARTS:
        median = statistics.median(figures[peer])
        row[f"{peer}_s"] = round(median, 4)
        row[f"{peer}_per_job_s"] = round(median / jobs, 4) if jobs else None
    return row


# --- planning -------------------------------------------------------------------------------


def applied(desired: Desired, empty: FleetObservation) -> FleetObservation:
    """The cluster as observed with no job, and every desired unit reported running (the
    engines as jobs on their first node, the router on the login node)."""
    found = FleetObservation(empty.fleet)
    by_host: dict[str, list[UnitRecord]] = {name: [] for name in empty.hosts}
    for deployment in desired.deployments:
        for hosted in deployment.units:
            nodes = tuple(hosted.unit.hosts or [hosted.host])
            job = (
                {"job": "1", "queue": "RUNNING", "nodes": nodes} if hosted.unit.gpu_indices else {}
            )
            by_host[hosted.host].append(
                UnitRecord(
                    id=hosted.id,
                    digest=hosted.digest,
                    argv=tuple(hosted.unit.argv),
                    port=hosted.unit.port,
                    gpus=tuple(hosted.unit.gpu_indices),
                    pid=1,
                    alive=True,
                    labels=hosted.labels,
                    **job,
                )
            )
    for name, host in empty.hosts.items():
        found.hosts[name] = host.model_copy(update={"units": tuple(by_host[name])})
    return found


def median_time(action: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        result = action()
        times.append(time.perf_counter() - started)
    return statistics.median(times), result


def measure_plan(
    fleet: Fleet, empty: FleetObservation, replicas: int, repeats: int
) -> dict[str, Any]:
    repo = open_repo(ROOT)
    repo.fleets = {fleet.name: fleet}
    text = release_text(replicas=replicas, batch=128, gpus=1)
    repo.releases = {"chat-8b": Release.model_validate(YAML(typ="safe").load(text))}
    repo.promotions = {}
    stages = Stages(
        head=HEAD,
        running=(StageRevision(release="chat-8b", stage="canary", revision=HEAD, pinned=False),),
    )
    seen = {fleet.name: empty}
    fresh_s, desired = median_time(
        lambda: desired_units(stages, lambda _: repo, seen, rules_of), repeats
    )
    assert not desired.errors, desired.errors[:3]
    plan_fresh_s, fresh_plan = median_time(lambda: plan(desired, {}), repeats)
    running = {fleet.name: applied(desired, empty)}
    memo = DesiredMemo()  # what a running loop keeps from the pass before
    desired_units(stages, lambda _: repo, running, rules_of, memo=memo)
    steady_s, steady = median_time(
        lambda: desired_units(stages, lambda _: repo, running, rules_of, memo=memo), repeats
    )
    plan_steady_s, steady_plan = median_time(lambda: plan(steady, observed_units(running)), repeats)
    assert steady_plan.empty, steady_plan.counts
    return {
        "units": sum(len(d.units) for d in desired.deployments),
        "replicas": replicas,
        "desired_fresh_s": round(fresh_s, 4),
        "plan_fresh_s": round(plan_fresh_s, 4),
        "desired_steady_s": round(steady_s, 4),
        "plan_steady_s": round(plan_steady_s, 4),
        "counts": [fresh_plan.counts.get("start", 0), steady_plan.counts.get("keep", 0)],
    }


# --- a run ----------------------------------------------------------------------------------


def run(points: list[int], repeats: int, replicas: int, plan_repeats: int) -> dict[str, Any]:
    capacity = 3 * GPUS_PER_NODE
    if any(n < 0 or n > capacity for n in points) or points != sorted(points):
        raise SystemExit(f"--jobs: rising counts from 0 to {capacity} (the lab's GPUs)")
    if not installed():
        raise SystemExit("Slurm is not installed (`make system-deps` installs it)")
    before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="denv-slurm-") as temp:
        lab = SlurmLab(Path(temp) / "lab")
        drivers: Drivers | None = None
        try:
            lab.start()
            fleet = lab_fleet(lab)
            env = {**lab.env, "DENV_HOME": str(Path(temp) / "home")}
            env.pop("DENV_REPO", None)
            drivers = Drivers(local_env=env)
            driver = drivers.get(fleet)
            assert isinstance(driver, SlurmDriver)
            observe(driver, 0)  # the login node's agent started, as a running bot has it
            empty = driver.observe(None)
            planned = measure_plan(fleet, empty, replicas, plan_repeats)
            rows: list[dict[str, Any]] = []
            ids: list[str] = []
            for count in points:
                ids += launch(driver, lab, len(ids), count)
                wait_running(driver, count)
                rows.append(measure_observe(driver, lab, ids, repeats))
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)  # progress
            added_per_job(rows)
        finally:
            if drivers is not None:
                drivers.close()
            lab.stop()
    return {
        "observe": rows,
        "plan": planned,
        "repeats": repeats,
        "plan_repeats": plan_repeats,
        "cores": os.cpu_count(),
        "load_average": [round(before, 2), round(os.getloadavg()[0], 2)],  # before, after
    }


def added_per_job(rows: list[dict[str, Any]]) -> None:
    """What each job adds to a pass: (pass at N jobs - pass at 0 jobs) / N, where the run
    has a 0 point."""
    base = next((row for row in rows if row["jobs"] == 0), None)
    for row in rows:
        for peer in PEERS + PARTS:
            added = None
            if base is not None and row["jobs"]:
                added = round((row[f"{peer}_s"] - base[f"{peer}_s"]) / row["jobs"], 4)
            row[f"{peer}_added_per_job_s"] = added


def ratio(row: dict[str, Any], top: str, bottom: str) -> str:
    a, b = row.get(top), row.get(bottom)
    return f"{a / b:.2f}x" if a and b else "-"


def ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", default="0,4,12", help="rising job counts, 0 to 12")
    parser.add_argument("--repeats", type=int, default=30, help="passes of each peer per point")
    parser.add_argument("--replicas", type=int, default=8, help="the planned release's replicas")
    parser.add_argument("--plan-repeats", type=int, default=20)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    try:
        points = [int(n) for n in args.jobs.split(",")]
    except ValueError:
        parser.error(f"--jobs: a comma list of counts, not {args.jobs!r}")
    if args.repeats < 1 or args.plan_repeats < 1 or args.replicas < 1:
        parser.error("--repeats, --plan-repeats and --replicas: at least 1")
    result = run(points, args.repeats, args.replicas, args.plan_repeats)
    if args.json:
        print(json.dumps(result, indent=1))
        return
    before, after = result["load_average"]
    print(
        f"Python {platform.python_version()}, {result['cores']} cores, load average {before} "
        f"before, {after} after; medians of {args.repeats} passes per peer, "
        f"{args.plan_repeats} plans"
    )
    print("jobs | peer | pass | per job | added per job | pass / driver's")
    for row in result["observe"]:
        for peer in PEERS + PARTS:
            cells = [str(row["jobs"]), peer]
            cells += [ms(row[f"{peer}{key}"]) for key in ("_s", "_per_job_s", "_added_per_job_s")]
            print(" | ".join([*cells, ratio(row, f"{peer}_s", "driver_s")]))
    p = result["plan"]
    print(
        f"plan, {p['units']} units ({p['replicas']} replicas + router): desired fresh "
        f"{ms(p['desired_fresh_s'])}, plan fresh {ms(p['plan_fresh_s'])}, desired steady "
        f"{ms(p['desired_steady_s'])}, plan steady {ms(p['plan_steady_s'])}; "
        f"start/keep {'/'.join(map(str, p['counts']))}"
    )


if __name__ == "__main__":
    main()
