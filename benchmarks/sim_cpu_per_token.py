"""CPU time the simulator spends per streamed token, a figure that holds on a busy machine.

`sim_capacity.py` answers how many streams one core holds, by wall-clock latencies, which
other processes on the machine disturb. This runs the simulator in this process (pinned to
`--server-cpu`) and the capacity benchmark's client in a child process, and reports the server
process's CPU time (user and system, from `os.times`) per streamed token, and the CPU time the
engine's fan-out spends per stream and step (thread CPU time around `Engine._deliver`): what an
optimisation of the streaming path changes, whatever else the machine runs.

    .venv/bin/python benchmarks/sim_cpu_per_token.py [--streams 256] [--time-scale 4]
    CODE=/tmp/old .venv/bin/python benchmarks/sim_cpu_per_token.py   # another tree's reconciler

`CODE` puts another checkout's `reconciler` package first (`mkdir /tmp/old && git archive REV
reconciler | tar -x -C /tmp/old`), to compare revisions run after run under the same load;
`--profile FILE` writes a cProfile of the server.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, os.environ.get("CODE", str(Path(__file__).resolve().parent.parent)))

from reconciler.engines.model.scheduler import Step
from reconciler.engines.sim.server import SimServer

sys.path.insert(1, str(Path(__file__).resolve().parent))
import sim_capacity

CLIENT = """
import asyncio, sys, time
sys.path.insert(0, sys.argv[5])
import sim_capacity as sc
sc.isolate(int(sys.argv[4]), False)
url, streams, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
gap = sc.stagger(streams)
records = asyncio.run(sc.drive(url, 0, streams, time.monotonic(), seconds, sc.OUTPUT_TOKENS, gap))
print(sum(len(r.arrivals) for r in records))
"""


async def measure(args: argparse.Namespace) -> str:
    spec = sim_capacity.spec_for(args.recipe, args.hardware)
    server = SimServer(spec.model_copy(update={"time_scale": args.time_scale}))
    listening = await server.start("127.0.0.1", 0)
    fan_out: list[tuple[float, int]] = []  # (thread CPU seconds, streams) per step
    deliver = server.engine._deliver

    def timed(step: Step, now: float, duration: float) -> None:
        start = time.thread_time()
        deliver(step, now, duration)
        fan_out.append((time.thread_time() - start, len(step.tokens)))

    server.engine._deliver = timed  # type: ignore[method-assign]
    profile = cProfile.Profile() if args.profile else None
    before, t0 = os.times(), time.monotonic()
    if profile is not None:
        profile.enable()
    client = await asyncio.create_subprocess_exec(
        *[sys.executable, "-c", CLIENT, listening.url, str(args.streams), str(args.seconds)],
        *[str(args.client_cpu), str(Path(__file__).resolve().parent)],
        stdout=subprocess.PIPE,
    )
    out, _ = await client.communicate()
    if profile is not None:
        profile.disable()
        profile.dump_stats(args.profile)
    after, wall = os.times(), time.monotonic() - t0
    await server.close()
    tokens = int(out)
    user, system = (after.user - before.user) / tokens, (after.system - before.system) / tokens
    per_stream = sum(c for c, _ in fan_out) / max(sum(n for _, n in fan_out), 1)
    return (
        f"{args.streams} streams, time scale x{args.time_scale:g}: {tokens} tokens in "
        f"{wall:.1f} s; server CPU per token {(user + system) * 1e6:.1f} µs (user "
        f"{user * 1e6:.1f}, system {system * 1e6:.1f}); fan-out CPU per stream and step "
        f"{per_stream * 1e6:.1f} µs"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--recipe", default="llama-3.1-8b/vllm@1")
    parser.add_argument("--hardware", default="h200")
    parser.add_argument("--streams", type=int, default=256)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--time-scale", type=float, default=4.0)
    parser.add_argument("--server-cpu", type=int, default=0)
    parser.add_argument("--client-cpu", type=int, default=1)
    parser.add_argument("--profile", help="write a cProfile of the server to this file")
    args = parser.parse_args()
    sim_capacity.isolate(args.server_cpu, False)
    print(asyncio.run(measure(args)))


if __name__ == "__main__":
    main()
