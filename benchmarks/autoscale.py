"""Elastic stages against static ones: a day of traffic replayed in minutes against three
stages side by side — static at the peak's count, static at the mean's count, and elastic
(bounds 1..peak) — each on its own local simulated fleet with its own bot.

    .venv/bin/python benchmarks/autoscale.py [--minutes 6] [--peak-replicas 4]
        [--hold-back] [--seed 0] [--json]

Each stage gets a workspace like benchmarks/converge.py's (a git repository of this one's
catalog, recipes and policies, a fleet of simulated H200s on a loopback address of its own,
DENV_HOME and DENV_CACHE inside it) with one release of `llama-3.1-8b/vllm@1` at max_batch 5
behind sglang-router, and `denv reconcile` running as a loop on it (`--interval 1s`). The
day (autoscale_trace.py: Mooncake-style lines, chat lengths, a trough ~9.8× below the top,
three bursts) is compressed into `--minutes`, each instant's arrival rate kept. One open-loop
load generator per stage replays the same trace against its router (streaming, filler text
of each line's length). At noon (half-way) a commit changes max_batch 5 → 4 on every stage:
a rolling update under load, to the recipe that serves the afternoon's peak; the day's top
is what `--peak-replicas` replicas of that recipe serve at the scaling policy's target
utilization (the simulator's capacity, rollout/capacity.py), so the peak's count is right
for the peak.

The elastic stage's policy is `default` tuned for the compressed day: decisions every 1 s
(4 minutes of the day at the default 6-minute run), rates over 10 s (40 minutes), scale-down
15 s (an hour) after the last change; its drain grace (30 s) is in request time, which is not
compressed. `--hold-back` gives the elastic fleet half its free GPUs only: the peak's count
does not fit, the rest is pending.

Measured per stage (`--json`: one object, keys `static_peak`, `static_mean`, `elastic`, and
`run` for the setup): `gpu_hours` (GPUs the fleet's engine units held, sampled each second,
integrated over the replay and scaled back to the uncompressed day: simulated hours),
`slo_attainment` (share of the trace's requests with TTFT ≤ 2 s and a mean ITL ≤ 100 ms, the
policy's targets; a failure is a miss), `failed_requests`, `scale_events`, `flaps` (a
reversal within the policy's down delay), `pending_s` (seconds, compressed, the count asked
for was more than the replicas placed), `up_s` (median seconds from a scale-up decision to
the router serving the new count, of those whose count came) and the replica counts seen.

Every process stops by itself: the replay ends with the trace (each request may take
60 s), the bots get SIGTERM, every unit is stopped and the folders removed — also on
failure, Ctrl-C or SIGTERM; a unit that will not stop is named and its folder kept.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from statistics import median
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import autoscale_trace as day
from converge import ROOT, SIGNATURE, Workspace, fleet_text, stop_on_sigterm

from reconciler.bench.loadgen import Target, open_loop
from reconciler.bench.records import RequestRecord
from reconciler.fleet.hostagent import AgentClient
from reconciler.fleet.transport import LocalTransport
from reconciler.rollout.capacity import replica_capacity, targets
from reconciler.spec.loader import load_repo
from reconciler.spec.scaling import ScalingPolicy
from reconciler.spec.sources import WorkTree

RECIPE = "llama-3.1-8b/vllm@1"
BATCH, ROLLED_BATCH = 5, 4  # the morning's max_batch, the afternoon's
SAMPLE_S = 1.0
POLICY = ScalingPolicy.model_validate(
    {"interval": "1s", "window": "10s", "down": {"delay": "15s", "drain_grace": "30s"}}
)
POLICY_TEXT = (
    "  bench:\n    interval: 1s\n    window: 10s\n    down: { delay: 15s, drain_grace: 30s }\n"
)
WEIGHTS = "hf://meta-llama/Llama-3.1-8B-Instruct@0e9e39f249a16976918f6564b8830bc894c89659"


def release_text(replicas: int | None, peak: int, batch: int, low: int = 1) -> str:
    """Static at `replicas`, or elastic (None) between `low` and `peak`."""
    bounds = "" if replicas else f"    replicas: {{ min: {low}, max: {peak}, policy: bench }}\n"
    return (
        f"release:\n  model: day\n  weights: {WEIGHTS}\n  recipe: {RECIPE}\n"
        f"  overrides:\n    settings: {{ max_batch: {batch} }}\n"
        f"  topology: {{ mode: aggregated, replicas: {replicas or low}, gpus: 1 }}\n"
        f"stages:\n  - name: prod\n    fleets: [bench]\n{bounds}"
    )


class Stage:
    """One stage's workspace, its bot, and what is sampled of its fleet."""

    def __init__(
        self,
        name: str,
        replicas: int | None,
        peak: int,
        gpus: int,
        policy: str = POLICY_TEXT,
        low: int = 1,
    ) -> None:
        """`policy`: the scaling policies' text appended to policies/scaling.yaml (it names
        `bench`); `low`: an elastic stage's minimum count."""
        self.name, self.replicas, self.peak, self.low = name, replicas, peak, low
        self.ws = Workspace(max(1, gpus - 1), 1, 1, timeout=180.0)
        self.ws.write("fleets/bench.yaml", fleet_text(gpus, self.ws.address))
        policies = self.ws.repo / "policies/scaling.yaml"
        policies.write_text(policies.read_text() + policy)
        self.commit(BATCH, "a day of traffic")
        self.agent = AgentClient(LocalTransport(env=self.ws.env), sys.executable, resident=True)
        self.bot: subprocess.Popen[str] | None = None
        self.said: list[tuple[float, str]] = []
        self.samples: list[tuple[float, int, int, int]] = []  # at, GPUs, placed, serving
        self.router: str | None = None

    def commit(self, batch: int, message: str) -> None:
        self.ws.write(
            "releases/day/denv.yaml", release_text(self.replicas, self.peak, batch, self.low)
        )
        git = self.ws.git
        index = git.index
        index.add_all()
        index.write()
        parents = [] if git.head_is_unborn else [git.head.target]
        git.create_commit("HEAD", SIGNATURE, SIGNATURE, message, index.write_tree(), parents)

    def start_bot(self) -> None:
        argv = [sys.executable, "-m", "reconciler", "reconcile", "--repo", str(self.ws.repo)]
        argv += ["--interval", "1s", "--drain", "30s", "--ready-timeout", "120s"]
        log = (self.ws.root / "bot.log").open("w")
        self.bot = subprocess.Popen(
            argv, env=self.ws.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )

        def read() -> None:
            assert self.bot is not None and self.bot.stdout is not None
            for line in self.bot.stdout:
                self.said.append((time.perf_counter(), line.rstrip()))
                log.write(line)
                log.flush()
            log.close()

        threading.Thread(target=read, daemon=True).start()

    def sample(self) -> None:
        """GPUs the engine units hold, how many are placed, and how many the router serves."""
        units = [u for u in self.agent.units() if u.alive]
        engines = [u for u in units if u.labels.get("role") == "aggregated"]
        router = next((u for u in units if u.labels.get("role") == "router"), None)
        if router is not None and router.port is not None:
            self.router = f"http://{self.ws.address}:{router.port}"
        serving = len(_get(f"{self.router}/workers").get("workers", [])) if self.router else 0
        gpus = sum(len(u.gpus) or 1 for u in engines)
        self.samples.append((time.perf_counter(), gpus, len(engines), serving))

    def serving(self) -> int:
        return self.samples[-1][3] if self.samples else 0

    def stop(self, logs: Path | None) -> None:
        """The bot first (SIGTERM: it ends its waits and exits), then every unit; its output
        copied into `logs` first."""
        if self.bot is not None and self.bot.poll() is None:
            self.bot.send_signal(signal.SIGTERM)
            try:
                self.bot.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.bot.kill()
                self.bot.wait(timeout=10)
        self.agent.close()
        if logs is not None:
            logs.mkdir(parents=True, exist_ok=True)
            (logs / f"{self.name}.log").write_text("".join(f"{t:.2f} {x}\n" for t, x in self.said))
        self.ws.teardown()


def _get(url: str) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            found = json.loads(answer.read())
            return found if isinstance(found, dict) else {}
    except (OSError, ValueError):
        return {}


def sampler(stages: list[Stage], stop: threading.Event) -> None:
    while not stop.wait(SAMPLE_S):
        for stage in stages:
            try:
                stage.sample()
            except Exception as exc:
                print(f"  {stage.name}: sample failed: {exc}", file=sys.stderr)


def wait_ready(stages: list[Stage], counts: list[int], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not all(s.serving() >= n for s, n in zip(stages, counts, strict=True)):
        if time.monotonic() > deadline:
            said = {s.name: s.said[-5:] for s in stages}
            raise SystemExit(f"the stages were not serving after {timeout:g}s: {said}")
        if any(s.bot is not None and s.bot.poll() is not None for s in stages):
            raise SystemExit("a bot exited: " + str({s.name: s.said[-10:] for s in stages}))
        time.sleep(0.5)


async def replay(
    stages: list[Stage], lines: list[Any], seconds: float
) -> list[list[RequestRecord]]:
    """The trace against every stage at once; half-way, the rolling update on each."""
    at = [line.timestamp / 1000 for line in lines]
    loop = asyncio.get_running_loop()
    roll = loop.call_later(seconds / 2, _roll, stages)
    try:
        runs = []
        for stage in stages:
            model = _get(f"{stage.router}/v1/models")["data"][0]["id"]
            target = Target(url=str(stage.router), model=model, prompt="text", timeout_s=60)
            runs.append(open_loop(target, lines, at))
        return list(await asyncio.gather(*runs))
    finally:
        roll.cancel()


def _roll(stages: list[Stage]) -> None:
    for stage in stages:
        stage.commit(ROLLED_BATCH, f"max_batch {BATCH} → {ROLLED_BATCH}")
    print("  rolling update committed on every stage", file=sys.stderr, flush=True)


def figures(
    stage: Stage, records: list[RequestRecord], start: float, end: float, scale: float
) -> dict[str, Any]:
    slo = day.Slo(POLICY.ttft, POLICY.itl)
    samples = [(t - start, g, p, s) for t, g, p, s in stage.samples if start <= t <= end]
    events = [(t - start, a, b) for t, a, b in day.scale_events(stage.said) if t >= start]
    first = samples[0][2] if samples else 0
    asked = [(0.0, stage.replicas or first), *[(t, b) for t, _, b in events]]
    placed = [(t, p) for t, _, p, _ in samples]
    served = (  # each scale-up's wait for the router to serve its count, if it came
        next((u - t for u, _, _, s in samples if u >= t and s >= b), None)
        for t, a, b in events
        if b > a
    )
    ups = [wait for wait in served if wait is not None]
    gpu_s = day.gpu_seconds([(t, g) for t, g, _, _ in samples], end - start)
    return {
        "gpu_hours": round(gpu_s * scale / 3600, 2),
        "slo_attainment": round(day.attainment(slo, records, len(records)), 4),
        "failed_requests": sum(not r.ok for r in records),
        "requests": len(records),
        "scale_events": len(events),
        "flaps": day.flaps(events, POLICY.down.delay),
        "pending_s": round(day.pending_seconds(asked, placed, end - start), 1),
        "up_s": round(median(ups), 1) if ups else None,
        "replicas_min": min((p for _, _, p, _ in samples), default=0),
        "replicas_max": max((p for _, _, p, _ in samples), default=0),
        "replicas_mean": round(gpu_s / (end - start), 2),
        "errors": [  # the first few failures: when (s into the replay), what, and why
            {"at": round(r.sent_s, 1), "error": r.error_label, "detail": r.detail}
            for r in records
            if not r.ok
        ][:5],
    }


def stage_plan(peak: int, hold_back: bool) -> list[tuple[str, int | None, int]]:
    """(name, replicas — None: elastic 1..peak —, GPUs of its fleet) of each stage: its
    count and a spare GPU (for the rolling update's surge). Holding back leaves the elastic
    fleet half of the GPUs free beside its minimum of one."""
    mean = math.ceil(peak * day.MEAN / day.TOP)
    free = peak  # peak + 1 GPUs, the minimum's one taken
    return [
        ("static_peak", peak, peak + 1),
        ("static_mean", mean, mean + 1),
        ("elastic", None, peak + 1 - (free // 2 if hold_back else 0)),
    ]


def run(args: argparse.Namespace) -> dict[str, Any]:
    repo = load_repo(WorkTree(ROOT))
    recipe = repo.recipes[RECIPE]
    recipe = recipe.model_copy(
        update={"settings": recipe.settings.model_copy(update={"max_batch": ROLLED_BATCH})}
    )
    model = repo.models[recipe.model]
    hardware = repo.resolve_hardware("h200")
    assert hardware is not None
    capacity = replica_capacity(recipe, hardware, model, 512, 256, targets(POLICY, {}))
    assert capacity is not None
    seconds = args.minutes * 60
    scale = day.DAY_S / seconds
    peak_rps = args.peak_replicas * capacity * POLICY.target_utilization
    lines = day.trace(seconds, peak_rps, repo.workloads, args.seed)
    plan = stage_plan(args.peak_replicas, args.hold_back)
    mean, elastic_gpus = plan[1][1], plan[2][2]
    stages: list[Stage] = []
    stop = threading.Event()
    load_before = os.getloadavg()[0]
    try:
        for name, replicas, gpus in plan:
            stages.append(Stage(name, replicas, args.peak_replicas, gpus))
        threading.Thread(target=sampler, args=(stages, stop), daemon=True).start()
        for stage in stages:
            stage.start_bot()
        wait_ready(stages, [s.replicas or 1 for s in stages], 300)
        say(f"serving; replaying {len(lines)} requests over {seconds:g}s (a day ÷ {scale:g})")
        start = time.perf_counter()
        results = asyncio.run(replay(stages, lines, seconds))
        end = time.perf_counter()
        stop.set()
        out: dict[str, Any] = {
            s.name: figures(s, r, start, end, scale) for s, r in zip(stages, results, strict=True)
        }
    finally:
        stop.set()
        for stage in stages:
            stage.stop(args.logs)
    out["run"] = {
        "date": time.strftime("%Y-%m-%d"),
        "simulated": True,
        "seconds": round(end - start, 1),
        "day_scale": round(scale, 1),
        "requests": len(lines),
        "peak_rps": round(peak_rps, 2),
        "trough_rps": round(peak_rps * day.BOTTOM / day.TOP, 2),
        "mean_rps": round(len(lines) / seconds, 2),
        "capacity_rps": round(capacity, 3),
        "replicas": {"static_peak": args.peak_replicas, "static_mean": mean, "elastic": "1.."},
        "elastic_gpus": elastic_gpus,
        "hold_back": args.hold_back,
        "startup_model_s": day.startup_s(model),
        "startup_model_scaled_s": round(day.startup_s(model) / scale, 3),
        "load_before": load_before,
        "load_after": os.getloadavg()[0],
    }
    return out


def say(line: str) -> None:
    print(f"  {line}", file=sys.stderr, flush=True)


def table(out: dict[str, Any]) -> str:
    rows = [
        "| stage | GPU-hours | SLO attainment | failed | scale events | flaps | pending | "
        "replicas | scale-up to serving |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name in ("static_peak", "static_mean", "elastic"):
        f = out[name]
        rows.append(
            f"| {name} | {f['gpu_hours']} | {f['slo_attainment']:.2%} | {f['failed_requests']} "
            f"| {f['scale_events']} | {f['flaps']} | {f['pending_s']} s | "
            f"{f['replicas_min']}–{f['replicas_max']} (mean {f['replicas_mean']}) | "
            f"{f['up_s'] if f['up_s'] is not None else '–'} s |"
        )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=6.0, help="the day replayed in this")
    parser.add_argument("--peak-replicas", type=int, default=4)
    parser.add_argument("--hold-back", action="store_true", help="half the free GPUs held back")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--logs", type=Path, help="each bot's output kept in this folder")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    if args.peak_replicas < 2 or args.minutes <= 0:
        parser.error("--peak-replicas must be 2 or more and --minutes positive")
    stop_on_sigterm()
    try:
        out = run(args)
    except KeyboardInterrupt:
        raise SystemExit("interrupted (every unit stopped, unless named above)") from None
    print(json.dumps(out, indent=1) if args.json else table(out))


if __name__ == "__main__":
    main()
