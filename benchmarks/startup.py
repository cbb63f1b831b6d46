"""Start-up time of the CLI: `denv --help`, `denv validate` and `denv bench` (the ranking of
every result) against `python -c "import typer"`, the least any typer command can take.

    .venv/bin/python benchmarks/startup.py [--repeats 10] [--json]

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
}
BASELINE = 'python -c "import typer"'
STATE = tempfile.mkdtemp(prefix="denv-startup-")  # `denv bench`'s last ranking, the cache


def timed(argv: list[str]) -> tuple[float, float]:
    """Wall and CPU (user + sys) seconds of one run."""
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "XDG_STATE_HOME": STATE,
        "DENV_CACHE": str(Path(STATE) / "cache"),
    }
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu


def measure(repeats: int) -> list[dict[str, object]]:
    walls: dict[str, list[float]] = {name: [] for name in COMMANDS}
    cpus: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for argv in COMMANDS.values():  # one untimed run each: the OS file cache and denv's warm
        timed(argv)
    for _ in range(repeats):
        for name, argv in COMMANDS.items():
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
        for name in COMMANDS
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--json", action="store_true", help="one JSON list of objects")
    args = parser.parse_args()
    before = os.getloadavg()[0]
    rows = measure(args.repeats)
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
