"""Time to add one replica to a running deployment, from the decision to the router serving
it: the reconciler side by side with a bash script that starts the same argv.

    .venv/bin/python benchmarks/add_replica.py [--replicas 1,4] [--repeats 5] [--json]

Each repeat gets a fresh workspace (benchmarks/converge.py's: a git repository of this one's
catalog, recipes and policies, one local fleet of simulated H200s on a loopback address of
its own, one release of N one-GPU replicas of `llama-3.1-8b/vllm@1` behind sglang-router, a
spare GPU). The bot deploys the N replicas (`denv reconcile --once`), then a commit asks for
N + 1, and both sides add the one replica, taking turns going first:

- bot: `denv reconcile --once` on that commit. Measured: its `apply_seconds`, from the plan it
  acts on (its decision: the count it runs, as an elastic stage's autoscaler sets it inside
  the same pass) until the replica serves — ready, and listed by the router, which the bot
  adds it to once ready. Its whole wall time (interpreter, reading git, observing, the lease)
  is reported beside it (`once_s`): a running bot pays that once, not per decision;
- script: bash starting the new replica's argv (from the plan) in the background, `curl` on
  its readiness every 0.2 s (the bot's interval), then `curl` adding it to the router (the
  API the bot uses) and polling the router's worker list every 0.05 s (as the bot does)
  until the router lists N + 1. The replica it started is stopped and taken out of the
  router after, so that the bot meets the same state (N serving); when the script goes
  second, the bot's replica is stopped and taken out first, likewise.

`--json` prints one JSON list, an object per N: `replicas` (N), `bot_s` and `script_s`
(medians of the repeats, seconds), `ratio` (bot ÷ script), `once_s`, `repeats`, `pairs`
(each repeat's bot and script seconds) and the 1-minute load average before and after.

Every unit is stopped and the folder removed after each repeat, also on failure, Ctrl-C or
SIGTERM (converge.py's teardown).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import converge
from converge import ROOT, Workspace, converged, listening, say, stop_on_sigterm

sys.path.insert(0, str(ROOT))

from reconciler.engines.units import Unit
from reconciler.reconcile import probes


def add_script_text(unit: Unit, router: Unit, listed: int, log: Path) -> str:
    """Start `unit`, wait for its readiness, add it to `router`, wait until it lists `listed`."""
    assert unit.readiness is not None
    env = [f"{k}={v}" for k, v in unit.env.items()]
    command = shlex.join(["env", *env, *unit.argv]) if env else shlex.join(unit.argv)
    workers = f"{probes.base_url(router)}/workers"
    body = json.dumps({"url": probes.base_url(unit)})
    return "\n".join(
        [
            "set -eu",
            'ready() { until curl -fs -o /dev/null --max-time 2 "$1"; do sleep 0.2; done; }',
            'listing() { until [ "$(curl -fs --max-time 2 "$1" | grep -o \'"url":\' | wc -l)"'
            ' -ge "$2" ]; do sleep 0.05; done; }',
            f"{command} >{shlex.quote(str(log))} 2>&1 &",
            f"ready {shlex.quote(f'{probes.base_url(unit)}{unit.readiness.path}')}",
            f"curl -fs -o /dev/null --max-time 10 -X POST -H 'Content-Type: application/json'"
            f" -d {shlex.quote(body)} {shlex.quote(workers)}",
            f"listing {shlex.quote(workers)} {listed}",
        ]
    )


def out_of_router(router: Unit, unit: Unit) -> None:
    """The replica's worker taken out of the router, and waited for until it is gone."""
    url = probes.base_url(unit)
    worker = (probes.router_workers(router) or {}).get(url or "")
    if worker is not None:
        probes.remove_worker(router, worker)
    converge.wait(
        lambda: url not in (probes.router_workers(router) or {}), 30, "the router to drop it"
    )


def run_add_script(ws: Workspace, unit: Unit, router: Unit) -> float:
    """Wall seconds of the script; what it started is stopped and out of the router after."""
    log = ws.root / f"script-{time.monotonic_ns()}.log"
    script = ws.root / "add.sh"
    script.write_text(add_script_text(unit, router, ws.replicas, log) + "\n")
    started = time.perf_counter()
    process = subprocess.Popen(["bash", str(script)], env=ws.env, start_new_session=True)
    try:
        code = process.wait(timeout=ws.timeout)
        seconds = time.perf_counter() - started
        if code != 0:
            raise SystemExit(f"the add script failed ({code}); its replica's log: {log}")
        assert probes.base_url(unit) in (probes.router_workers(router) or {})
        return seconds
    finally:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                break
            if probes.wait_until(lambda: not listening(unit), 10, interval=0.05):
                break
        process.wait(timeout=10)
        out_of_router(router, unit)


def one_repeat(ws: Workspace, script_first: bool) -> dict[str, float]:
    ws.release(batch=128)
    first, _ = ws.reconcile()
    converged(ws)
    ws.replicas += 1  # the decision: one replica more
    ws.release(batch=128)
    units = converge.units_of(ws.look())
    [router] = [u for u in units if u.role == "router"]
    new = [u for u in units if u.role != "router" and u.name.endswith(f"-{ws.replicas - 1}")]
    assert len(new) == 1, [u.name for u in units]
    row: dict[str, float] = {"deploy": first}
    if script_first:
        row["script"] = run_add_script(ws, new[0], router)
    once, answer = ws.reconcile()
    assert answer["done"].get("start") == 1, answer
    converged(ws)
    row["bot"], row["once"] = answer["apply_seconds"], once
    if not script_first:
        [mine] = [u for u in ws.agent.units() if u.id.endswith(new[0].name)]
        out_of_router(router, new[0])
        ws.agent.stop(mine.id, grace=2)
        converge.wait(lambda: not listening(new[0]), 30, "the bot's new replica to exit")
        row["script"] = run_add_script(ws, new[0], router)
    return row


def point(args: argparse.Namespace, replicas: int) -> dict[str, Any]:
    load_before = os.getloadavg()[0]
    rows = []
    for i in range(args.repeats):
        ws = Workspace(replicas, 1, 1, args.timeout)
        try:
            row = one_repeat(ws, script_first=i % 2 == 1)
        finally:
            ws.teardown()
        say(
            f"{replicas} + 1 replicas, repeat {i + 1}/{args.repeats}",
            f"bot {row['bot']:.2f}s (--once {row['once']:.2f}s), script {row['script']:.2f}s, "
            f"load average {os.getloadavg()[0]:.1f}",
        )
        rows.append(row)
    bot = statistics.median(r["bot"] for r in rows)
    script = statistics.median(r["script"] for r in rows)
    return {
        "replicas": replicas,
        "bot_s": round(bot, 3),
        "script_s": round(script, 3),
        "ratio": round(bot / script, 3),
        "once_s": round(statistics.median(r["once"] for r in rows), 3),
        "repeats": args.repeats,
        "pairs": [[round(r["bot"], 3), round(r["script"], 3)] for r in rows],
        "load_before": load_before,
        "load_after": os.getloadavg()[0],
    }


def run(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", default="1,4", help="replicas running before the add")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per step at most")
    parser.add_argument("--json", action="store_true", help="print one JSON list of points")
    args = parser.parse_args(argv)
    sizes = [int(n) for n in args.replicas.split(",")]
    if any(n < 1 for n in sizes) or args.repeats < 1:
        parser.error("--replicas sizes and --repeats must be at least 1")
    stop_on_sigterm()
    points = [point(args, n) for n in sizes]
    if args.json:
        print(json.dumps(points, indent=1))
        return
    print(f"{'replicas':>8} | {'bot':>7} {'script':>7} {'÷':>5} | {'--once':>7} | load")
    for p in points:
        print(
            f"{p['replicas']:>6}+1 | {p['bot_s']:>6.2f}s {p['script_s']:>6.2f}s "
            f"{p['ratio']:>4.2f}× | {p['once_s']:>6.2f}s | "
            f"{p['load_before']:.1f}–{p['load_after']:.1f}"
        )


def main() -> None:
    try:
        run(sys.argv[1:])
    except KeyboardInterrupt:
        raise SystemExit("interrupted (every unit stopped, unless named above)") from None


if __name__ == "__main__":
    main()
