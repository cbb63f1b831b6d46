"""Start-up time of the CLI: `denv --help`, `denv validate`, `denv bench` (the ranking of
every result) and the optimizer's read-only commands (`optimize status`, `candidates`, `stop`
on a saved study of three candidates) against `python -c "import typer"`, the least any typer
command can take.

    .venv/bin/python benchmarks/startup.py [--repeats 10] [--only optimize] [--json]

Each command runs `--repeats` times in a fresh interpreter, the commands interleaved so that
a change in the machine's load hits them alike; the figures are the median wall time and the
median CPU time (user + sys of the child: what an idle machine takes in wall time, near
enough, where a busy one stretches the wall time). `denv` runs with a parse cache of its own,
warmed by one untimed run (the steady state of a user's second command). `--json` prints one
JSON list of objects: command, median_s, min_s, cpu_median_s, cpu_min_s, runs, and x_baseline
(the median over the baseline's median). Goals (docs/performance.md): `--help` within 2x the
baseline, `bench` under 1 s, on an idle machine.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DENV = [sys.executable, "-m", "reconciler"]
COMMANDS: dict[str, list[str]] = {
    'python -c "import typer"': [sys.executable, "-c", "import typer"],
    "denv --help": [*DENV, "--help"],
    "denv validate": [*DENV, "validate"],
    "denv bench": [*DENV, "bench"],
    "denv optimize status": [*DENV, "optimize", "status"],
    "denv optimize candidates": [*DENV, "optimize", "candidates", "chat-8b/canary"],
    "denv optimize stop": [*DENV, "optimize", "stop", "chat-8b/canary"],
}
BASELINE = 'python -c "import typer"'
STATE = tempfile.mkdtemp(prefix="denv-startup-")  # `denv bench`'s last ranking, the cache
OPTIMIZE_HOME = Path(STATE) / "optimize"  # the optimizer's state: one study, not running


def save_study() -> None:
    """A finished study of chat-8b/canary with three candidates, as `optimize start` leaves
    one, for the read-only commands to read."""
    from reconciler.bench.traffic_stats import trace_stats
    from reconciler.optimize.candidates import Row, Run, Status, StudyState
    from reconciler.optimize.state import StateStore
    from reconciler.optimize.verify import gain_interval
    from reconciler.spec.result import Metrics, Percentiles, TrafficLine

    at = datetime.datetime(2026, 12, 1, tzinfo=datetime.UTC)

    def row(cid: str, goal: float, status: Status) -> Row:
        run = Run(metrics=Metrics(ttft_ms=Percentiles(p99=300.0)), goal=goal, rate=2 * goal)
        gain = gain_interval([10.0, 10.1], [goal, goal * 1.01], True)
        return Row(id=cid, change=cid, gpus=1, status=status, runs=[run], gain=gain, at=at)

    line = TrafficLine(timestamp=0, input_length=900, output_length=32, hash_ids=[1])
    state = StudyState(
        release="chat-8b",
        stage="canary",
        fleet="local",
        goal="throughput",
        budget_gpus=1,
        study="chat-8b.canary.throughput",
        storage="sqlite:///studies.db",
        traffic="trace.jsonl",
        traffic_digest="0",
        shape=trace_stats([line]),
        started=at,
        state="finished",
        current=row("current", 10.0, Status.VERIFIED),
        candidates=[row(f"c-{n}", 10.0 + n, Status.REJECTED) for n in range(3)],
    )
    StateStore(OPTIMIZE_HOME).save(state)


def timed(argv: list[str]) -> tuple[float, float]:
    """Wall and CPU (user + sys) seconds of one run."""
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "XDG_STATE_HOME": STATE,
        "DENV_CACHE": str(Path(STATE) / "cache"),
        "DENV_OPTIMIZE_HOME": str(OPTIMIZE_HOME),
    }
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu


def measure(repeats: int, only: str | None = None) -> list[dict[str, object]]:
    chosen = {n: a for n, a in COMMANDS.items() if n == BASELINE or not only or only in n}
    walls: dict[str, list[float]] = {name: [] for name in chosen}
    cpus: dict[str, list[float]] = {name: [] for name in chosen}
    save_study()
    for argv in chosen.values():  # one untimed run each: the OS file cache and denv's warm
        timed(argv)
    for _ in range(repeats):
        for name, argv in chosen.items():
            wall, cpu = timed(argv)
            walls[name].append(wall)
            cpus[name].append(cpu)
    base = statistics.median(walls[BASELINE])
    return [
        {
            "command": name,
            "median_s": round(statistics.median(walls[name]), 3),
            "min_s": round(min(walls[name]), 3),
            "cpu_median_s": round(statistics.median(cpus[name]), 3),
            "cpu_min_s": round(min(cpus[name]), 3),
            "runs": len(walls[name]),
            "x_baseline": round(statistics.median(walls[name]) / base, 2),
        }
        for name in chosen
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--json", action="store_true", help="one JSON list of objects")
    parser.add_argument("--only", help="only the commands whose name contains this")
    args = parser.parse_args()
    before = os.getloadavg()[0]
    rows = measure(args.repeats, args.only)
    if args.json:
        print(json.dumps(rows))
        return
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average "
        f"{before:.1f} before, {os.getloadavg()[0]:.1f} after"
    )
    print(
        f"{'command':<28} {'median':>8} {'min':>8} {'x typer':>8} {'CPU median':>11} "
        f"{'CPU min':>8}   ({args.repeats} runs)"
    )
    for row in rows:
        print(
            f"{row['command']:<28} {row['median_s']:>7.3f}s {row['min_s']:>7.3f}s "
            f"{row['x_baseline']:>8.2f} {row['cpu_median_s']:>10.3f}s {row['cpu_min_s']:>7.3f}s"
        )


if __name__ == "__main__":
    main()
