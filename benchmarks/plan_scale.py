"""Time to plan N units: desired-state resolution (placement, ports, engine units) and the
pure `plan()` diff, measured apart, for a fresh deploy, a steady state and a full roll.

    .venv/bin/python benchmarks/plan_scale.py [--units 100,1000,10000] [--repeats 5]
        [--desired-repeats 3] [--json]

The repository is this one's catalog and recipes, in memory, with one simulated fleet of
8-GPU hosts and releases of 8 one-GPU replicas each (9 units with the router), as many as
N units need. "Observed" is what the agents would report after an apply, built from the
desired state itself; the roll changes one setting of every release. "Steady" is a pass of a
running loop, which keeps the last pass's resolved deployments (reconcile.desired.DesiredMemo);
"steady cold" is the same pass in a bot just started, without them. Times are medians of
wall-clock seconds, and of the process's CPU seconds beside them (`*_cpu_s`: what a busy
machine changes least); `--json` prints one JSON list, an object per point.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from reconciler.fleet.drivers.registry import rules_of  # noqa: E402
from reconciler.fleet.model.observed import (  # noqa: E402
    FleetObservation,
    Gpu,
    HostObservation,
    UnitRecord,
)
from reconciler.reconcile.desired import (  # noqa: E402
    Desired,
    DesiredMemo,
    desired_units,
    observed_units,
)
from reconciler.reconcile.plan import plan  # noqa: E402
from reconciler.reconcile.revisions import StageRevision, Stages  # noqa: E402
from reconciler.spec.fleet import Fleet  # noqa: E402
from reconciler.spec.loader import open_repo  # noqa: E402
from reconciler.spec.release import Release  # noqa: E402
from reconciler.spec.repo import Repo  # noqa: E402

HEAD = "0" * 40
REPLICAS = 8  # per release; + 1 router = 9 units


def repository(units: int, batch: int) -> tuple[Repo, Stages]:
    repo = open_repo(ROOT)
    releases = max(1, round(units / (REPLICAS + 1)))
    repo.fleets = {
        "bench": Fleet.model_validate(
            {
                "name": "bench",
                "provider": "bench",
                "hardware": "h200",
                "simulated": True,
                "ssh": {"user": "denv"},
                "hosts": [
                    {"name": f"h{i:05d}", "address": f"10.9.{i // 250}.{i % 250 + 1}", "gpus": 8}
                    for i in range(releases)
                ],
            }
        )
    }
    repo.releases = {
        f"r{i:05d}": Release.model_validate(
            {
                "release": {
                    "model": f"r{i:05d}",
                    "weights": "hf://meta-llama/Llama-3.1-8B-Instruct@0e9e39f",
                    "recipe": "llama-3.1-8b/vllm@1",
                    "overrides": {"settings": {"max_batch": batch}},
                    "topology": {"mode": "aggregated", "replicas": REPLICAS, "gpus": 1},
                },
                "stages": [{"name": "canary", "fleets": ["bench"]}],
            }
        )
        for i in range(releases)
    }
    repo.promotions = {}
    stages = Stages(
        head=HEAD,
        running=tuple(
            StageRevision(release=name, stage="canary", revision=HEAD, pinned=False)
            for name in sorted(repo.releases)
        ),
    )
    return repo, stages


def applied(desired: Desired, fleet: Fleet) -> FleetObservation:
    """What the agents report once `desired` runs."""
    by_host: dict[str, list[UnitRecord]] = {host.name: [] for host in fleet.hosts}
    for deployment in desired.deployments:
        for unit in deployment.units:
            by_host[unit.host].append(
                UnitRecord(
                    id=unit.id,
                    digest=unit.digest,
                    argv=tuple(unit.unit.argv),
                    port=unit.unit.port,
                    gpus=tuple(unit.unit.gpu_indices),
                    pid=1,
                    alive=True,
                    labels=unit.labels,
                )
            )
    found = FleetObservation("bench")
    for host in fleet.hosts:
        gpus = tuple(Gpu(index=i) for i in range(host.gpus))
        found.hosts[host.name] = HostObservation(
            host=host.name, source="simulated", gpus=gpus, units=tuple(by_host[host.name])
        )
    return found


def median_time(action: Callable[[], Any], repeats: int) -> tuple[float, float, Any]:
    """Median wall-clock and CPU seconds of `repeats` runs, and the last run's result."""
    times, cpu, result = [], [], None
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = action()
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return statistics.median(times), statistics.median(cpu), result


def measure(units: int, repeats: int, desired_repeats: int) -> dict[str, Any]:
    repo, stages = repository(units, batch=128)
    fleet = repo.fleets["bench"]
    fresh_s, fresh_cpu_s, desired = median_time(
        lambda: desired_units(stages, lambda _: repo, {}, rules_of), desired_repeats
    )
    assert not desired.errors, desired.errors[:3]
    seen = {"bench": applied(desired, fleet)}
    observed = observed_units(seen)
    cold_s, cold_cpu_s, _ = median_time(
        lambda: desired_units(stages, lambda _: repo, seen, rules_of), desired_repeats
    )
    memo = DesiredMemo()  # what a running loop keeps: the pass after the apply fills it
    desired_units(stages, lambda _: repo, seen, rules_of, memo=memo)
    steady_desired_s, steady_cpu_s, steady = median_time(
        lambda: desired_units(stages, lambda _: repo, seen, rules_of, memo=memo),
        desired_repeats,
    )
    assert steady == desired_units(stages, lambda _: repo, seen, rules_of)
    plan_fresh_s, _, fresh_plan = median_time(lambda: plan(desired, {}), repeats)
    plan_steady_s, _, steady_plan = median_time(lambda: plan(steady, observed), repeats)
    assert steady_plan.empty
    changed_repo, _ = repository(units, batch=256)
    rolled = desired_units(stages, lambda _: changed_repo, seen, rules_of)
    plan_roll_s, _, roll_plan = median_time(lambda: plan(rolled, observed), repeats)
    return {
        "units": sum(len(d.units) for d in desired.deployments),
        "deployments": len(desired.deployments),
        "hosts": len(fleet.hosts),
        "desired_fresh_s": fresh_s,
        "desired_steady_s": steady_desired_s,
        "desired_fresh_cpu_s": fresh_cpu_s,
        "desired_steady_cpu_s": steady_cpu_s,
        "desired_steady_cold_s": cold_s,  # a first pass of a new bot: no memo yet
        "desired_steady_cold_cpu_s": cold_cpu_s,
        "plan_fresh_s": plan_fresh_s,
        "plan_steady_s": plan_steady_s,
        "plan_roll_s": plan_roll_s,
        "counts": [
            fresh_plan.counts["start"],
            steady_plan.counts["keep"],
            roll_plan.counts["replace"],
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--units", default="100,1000,10000")
    parser.add_argument("--repeats", type=int, default=5, help="plan() runs per point")
    parser.add_argument(
        "--desired-repeats", type=int, default=3, help="desired-state resolutions per point"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON list of points")
    args = parser.parse_args()
    points = [int(n) for n in args.units.split(",")]
    if args.json:
        rows = [measure(units, args.repeats, args.desired_repeats) for units in points]
        print(json.dumps(rows, indent=1))
        return
    print(
        f"Python {platform.python_version()} on {platform.machine()}; medians of "
        f"{args.desired_repeats} resolutions and {args.repeats} plans"
    )
    print(
        f"{'units':>6} {'deploys':>7} {'hosts':>5} | "
        f"{'desired fresh':>13} {'desired steady':>14} | {'CPU fresh':>10} {'steady':>10} | "
        f"{'plan fresh':>10} {'plan steady':>11} {'plan roll':>9} | start/keep/replace"
    )
    for units in points:
        row = measure(units, args.repeats, args.desired_repeats)
        print(
            f"{row['units']:>6} {row['deployments']:>7} {row['hosts']:>5} | "
            f"{row['desired_fresh_s'] * 1000:>10.0f} ms "
            f"{row['desired_steady_s'] * 1000:>11.0f} ms | "
            f"{row['desired_fresh_cpu_s'] * 1000:>7.0f} ms "
            f"{row['desired_steady_cpu_s'] * 1000:>7.0f} ms | "
            f"{row['plan_fresh_s'] * 1000:>7.0f} ms {row['plan_steady_s'] * 1000:>8.0f} ms "
            f"{row['plan_roll_s'] * 1000:>6.0f} ms | {'/'.join(map(str, row['counts']))}",
            flush=True,
        )


if __name__ == "__main__":
    main()
