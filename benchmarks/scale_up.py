"""Time to add a replica: from the bot's scale-up decision to the router serving the new
replica, side by side with a bash script that starts the same argv and joins it the same way.

    .venv/bin/python benchmarks/scale_up.py [--from N] [--repeats 3] [--timeout SECONDS]
        [--json]

Each repeat gets a fresh workspace (converge.py's Workspace through autoscale.py's Stage: one
local simulated fleet of N + 1 GPUs on a loopback address of its own) with one elastic
release, `replicas: {min: N, max: N + 1}` (N = `--from`, 1 by default), of
`llama-3.1-8b/vllm@1` at max_batch 5 behind sglang-router, under a policy that reacts at once
(interval 1s, up delay 0, reactive only, one waiting request per replica), and
`denv reconcile` running as a loop (`--interval 1s`). Once the router serves the N replicas,
a burst of 8N + 8 concurrent streams of requests (more than N × max_batch, so requests wait)
runs through the router until the repeat ends.

- bot: from the moment the bot's line `scale <key>: N → N+1 (…)` is read (lines are
  timestamped as they arrive) until the router's `GET /workers` lists the new replica. The
  autoscaler (rollout/autoscale.py) prints it as it decides, while the loop's pass reads the
  desired counts (reconcile/loop.py `_scaled`, inside the pass's snapshot), before the plan
  is made and applied: included are the rest of that pass's snapshot and plan, the fleet's
  lease, the applier's start step (reconcile/steps/start.py): the agent launching the unit
  (its supervisor and the engine's process), the engine's start-up to ready (polled every
  0.2 s), and the join to the router (reconcile/steps/routers.py `join`: `POST /workers`, then
  until the router lists it, polled every 0.05 s, as the script polls it).
- script: then the bot gets SIGTERM, the new replica's unit is stopped through the agent and
  removed from the router, so that the stage is back where the bot's decision found it: the
  same workspace and machine, N replicas serving, the burst still running against the same
  router (requests wait again). A bash script then starts the new replica's recorded argv and
  env (the agent's unit record of the bot's replica, so exactly what the bot started, on the
  same port and GPU) in the background, `curl`s its readiness path every 0.2 s, `POST`s it
  to the router's `/workers` with the same body the bot sends, and polls `GET /workers` every
  0.05 s (as the bot does) until it is listed. Measured: the script's wall time, bash's
  start included.

The script goes second in every repeat (it needs the bot's unit record: the bot chooses the
port and GPU); both start from N replicas serving under the same burst, and each ends at the
same definition of serving.

`--json` prints one object: `bot_s`, `script_s` (medians, seconds), `ratio` (bot ÷ script),
`repeats`, `from` (N), `bot` and `script` (the per-repeat values) and the 1-minute load
average before and after (`load_before`, `load_after`). Progress lines go to stderr.

Every process stops by itself: the burst's streams end when the repeat does (each request
within 60 s), the bot gets SIGTERM, every unit is stopped and the folder removed after each
repeat, also on failure, Ctrl-C or SIGTERM; a unit that will not stop is named and its
folder kept.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from statistics import median

sys.path.insert(0, str(Path(__file__).resolve().parent))

from autoscale import Stage, _get
from autoscale_trace import scale_events
from converge import stop_on_sigterm, units_of, wait

from reconciler.fleet.model.observed import UnitRecord
from reconciler.reconcile import probes

POLICY_TEXT = (
    "  bench:\n    interval: 1s\n    window: 5s\n    predictive: false\n"
    "    max_waiting_per_replica: 1\n    up: { delay: 0s }\n"
    "    down: { delay: 10m, drain_grace: 5s }\n"
)


def burst(router: str, model: str, streams: int, stop: threading.Event) -> None:
    """`streams` threads, each sending one completion after another until `stop`."""
    body = json.dumps({"model": model, "prompt": "hello " * 200, "max_tokens": 200}).encode()

    def stream() -> None:
        while not stop.is_set():
            request = urllib.request.Request(
                f"{router}/v1/completions", body, {"Content-Type": "application/json"}
            )
            try:
                with urllib.request.urlopen(request, timeout=60) as answer:
                    answer.read()
            except OSError:
                stop.wait(0.2)

    for _ in range(streams):
        threading.Thread(target=stream, daemon=True).start()


def workers(router: str) -> set[str]:
    return {w["url"] for w in _get(f"{router}/workers").get("workers", [])}


def engines(stage: Stage) -> list[UnitRecord]:
    units = [u for u in stage.agent.units() if u.alive]
    return [u for u in units if u.labels.get("role") == "aggregated"]


def script_text(record: UnitRecord, ready: str, url: str, router: str, logs: Path) -> str:
    """Start the recorded argv, poll readiness, join the router, poll until it lists it."""
    env = [f"{k}={v}" for k, v in record.env.items()]
    command = shlex.join(["env", *env, *record.argv])
    join = shlex.quote(json.dumps({"url": url}))
    listed = shlex.quote(f'"url":"{url}"')
    return "\n".join(
        [
            "set -eu",
            f"{command} >{shlex.quote(str(logs / 'replica.log'))} 2>&1 &",
            f"until curl -fs -o /dev/null --max-time 2 {shlex.quote(ready)}; do sleep 0.2; done",
            f"curl -fs -o /dev/null -X POST -H 'Content-Type: application/json' -d {join} "
            f"{shlex.quote(router + '/workers')}",
            f"until curl -fs --max-time 2 {shlex.quote(router + '/workers')} | tr -d ' '"
            f" | grep -qF {listed}; do sleep 0.05; done",  # the bot's poll (routers.TAKE_POLL_S)
            "",
        ]
    )


def one_repeat(low: int, timeout: float) -> tuple[float, float]:
    stage = Stage("scale-up", None, low + 1, low + 1, POLICY_TEXT, low)
    stop = threading.Event()
    script: subprocess.Popen[bytes] | None = None
    try:
        stage.start_bot()

        def serving(count: int) -> bool:
            stage.sample()
            return stage.serving() >= count

        wait(lambda: serving(low), timeout, f"the stage serving its {low} replicas")
        router = str(stage.router)
        model = _get(f"{router}/v1/models")["data"][0]["id"]
        first = {u.id for u in engines(stage)}
        burst(router, model, 8 * low + 8, stop)
        wait(lambda: bool(scale_events(stage.said)), timeout, "the bot's scale-up decision")
        decided = scale_events(stage.said)[0]
        assert decided[1:] == (low, low + 1), decided
        wait(lambda: len(workers(router)) > low, timeout, "the router serving the new replica")
        bot_s = time.perf_counter() - decided[0]
        say(f"bot {bot_s:.2f}s")
        assert stage.bot is not None
        stage.bot.send_signal(signal.SIGTERM)
        stage.bot.wait(timeout=60)
        (new,) = [u for u in engines(stage) if u.id not in first]
        url = f"http://{stage.ws.address}:{new.port}"
        (router_unit,) = [u for u in units_of(stage.ws.look()) if u.role == "router"]
        stage.agent.stop(new.id, grace=2)
        worker_id = (probes.router_workers(router_unit) or {}).get(url)
        assert worker_id is not None and probes.remove_worker(router_unit, worker_id)
        wait(lambda: url not in workers(router), 30, "the router to drop the replica")
        path = next(u for u in units_of(stage.ws.look()) if u.role != "router").readiness
        assert path is not None
        logs = stage.ws.root / "script-logs"
        logs.mkdir()
        text = script_text(new, f"{url}{path.path}", url, router, logs)
        (stage.ws.root / "add.sh").write_text(text)
        started = time.perf_counter()
        script = subprocess.Popen(
            ["bash", str(stage.ws.root / "add.sh")], env=stage.ws.env, start_new_session=True
        )
        if script.wait(timeout=timeout) != 0:
            raise SystemExit(f"the script failed; logs in {logs}")
        script_s = time.perf_counter() - started
        say(f"script {script_s:.2f}s")
        return bot_s, script_s
    finally:
        stop.set()
        if script is not None:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(script.pid, sig)
                except ProcessLookupError:
                    break
                time.sleep(0.5)
        stage.stop(None)


def say(line: str) -> None:
    print(f"  {line}", file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="low", type=int, default=1, help="replicas before")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=180.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    stop_on_sigterm()
    load_before = os.getloadavg()[0]
    rows = []
    for i in range(args.repeats):
        say(f"repeat {i + 1}/{args.repeats}")
        rows.append(one_repeat(args.low, args.timeout))
    bot = [b for b, _ in rows]
    script = [s for _, s in rows]
    out = {
        "bot_s": median(bot),
        "script_s": median(script),
        "ratio": median(bot) / median(script),
        "repeats": args.repeats,
        "from": args.low,
        "bot": bot,
        "script": script,
        "load_before": load_before,
        "load_after": os.getloadavg()[0],
    }
    if args.json:
        print(json.dumps(out))
    else:
        print(f"{'bot s':>8} {'script s':>9} {'ratio':>6}  load")
        print(
            f"{out['bot_s']:8.2f} {out['script_s']:9.2f} {out['ratio']:6.2f}"
            f"  {load_before:.1f} → {out['load_after']:.1f}"
        )


if __name__ == "__main__":
    main()
