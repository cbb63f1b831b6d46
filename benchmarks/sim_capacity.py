"""How many concurrent streams one `denv sim serve` process sustains on one core.

The simulator is pinned to one CPU; this script (the client: plain asyncio + aiohttp, pinned to
another CPU) keeps C streams busy back to back for a fixed time per point and records when
every token-carrying chunk arrives. The simulator's `GET /admin/steps` then gives each engine
step's modelled duration and the requests whose first token it emitted; a request emits one
token in every step after that (one-token decode steps, no preemption at these loads), so the
modelled gap before its k-th token is the duration of the k-th step after its first. The ITL
error of a gap is (measured gap) - (modelled gap); a point holds when its p99 is under the
threshold. Points grow in concurrency until one fails.

    .venv/bin/python benchmarks/sim_capacity.py [--streams 16,32,64,...] [--seconds 10]

Prints one row per point and a closing line with the largest concurrency that held.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from reconciler.engines.sim.spec import SimSpec  # noqa: E402
from reconciler.spec.loader import open_repo  # noqa: E402

WARM_S = 2.0  # gaps before this are left out (connections opening, first prefills)


@dataclass
class Record:
    sent: float  # monotonic seconds
    arrivals: list[float]  # monotonic seconds of every token-carrying chunk
    id: str = ""


def spec_for(recipe: str, hardware: str) -> SimSpec:
    repo = open_repo(ROOT)
    r = repo.recipes[recipe]
    return SimSpec(
        served_model=r.model,
        weights=f"bench/{r.model}",
        model=repo.models[r.model],
        hardware=repo.hardware[hardware],
        recipe=r,
        gpus=r.topology.pools()[0][1].gpus,
        warmup_s=0,
    )


def isolate(cpu: int, realtime: bool) -> None:
    """Pin the calling process to one CPU; with `realtime`, also run it SCHED_FIFO, so that
    other processes on that CPU cannot delay its wake-ups by a scheduler tick (root only)."""
    os.sched_setaffinity(0, {cpu})
    if realtime:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))


def start_server(spec: SimSpec, cpu: int, realtime: bool) -> tuple[subprocess.Popen[bytes], str]:
    argv = [sys.executable, "-m", "reconciler", "sim", "serve", "--port", "0"]
    argv += ["--spec-json", spec.model_dump_json()]
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        cwd=ROOT,
        preexec_fn=lambda: isolate(cpu, realtime),
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()
    found = re.search(r"at (http://[^\s,]+)", line)
    if not found:
        proc.kill()
        raise SystemExit(f"the simulator did not start: {line!r}")
    return proc, found.group(1)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def drive(url: str, streams: int, seconds: float, prompt_len: int, out: int) -> list[Record]:
    """Keep `streams` requests in flight for `seconds`; every request's chunk arrivals."""
    records: list[Record] = []
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        stop_at = time.monotonic() + seconds

        async def stream(s: int) -> None:
            await asyncio.sleep(0.005 * s)  # no lockstep
            n = 0
            while time.monotonic() < stop_at:
                prompt = [(s * 7919 + n * 131 + i) % 100_000 + 1 for i in range(prompt_len)]
                body = {"prompt": prompt, "max_tokens": out, "ignore_eos": True, "stream": True}
                record = Record(time.monotonic(), [])
                async with session.post(url + "/v1/completions", json=body) as r:
                    async for line in r.content:
                        if line.startswith(b"data: {"):
                            record.arrivals.append(time.monotonic())
                            if not record.id:
                                record.id = json.loads(line[6:])["id"]
                record.arrivals = record.arrivals[:out]  # the usage chunk carries no token
                records.append(record)
                n += 1

        await asyncio.gather(*(stream(s) for s in range(streams)))
    return records


def point(url: str, pid: int, streams: int, seconds: float) -> dict[str, float]:
    prompt_len, out = 128, 128
    cpu0, own0, t0 = cpu_seconds(pid), time.process_time(), time.monotonic()
    records = asyncio.run(drive(url, streams, seconds, prompt_len, out))
    wall = time.monotonic() - t0
    server_cpu = cpu_seconds(pid) - cpu0
    client_cpu = time.process_time() - own0
    with urllib.request.urlopen(url + "/admin/steps") as r:
        steps = json.loads(r.read())["steps"]
    first = {rid: i for i, (_, _, _, ids) in enumerate(steps) for rid in ids}
    errors, gaps = [], []
    for record in records:
        s = first.get(record.id)
        got = record.arrivals
        if s is None or got[0] < t0 + WARM_S or s + len(got) > len(steps):
            continue
        for k in range(1, len(got)):
            gap = got[k] - got[k - 1]
            gaps.append(gap)
            errors.append(gap - steps[s + k][2])
    tokens = sum(len(r.arrivals) for r in records)
    ttft = [r.arrivals[0] - r.sent for r in records if r.arrivals and r.sent > t0 + WARM_S]
    errors.sort()
    return {
        "streams": streams,
        "tok_s": tokens / wall,
        "ttft_p50_ms": statistics.median(ttft) * 1e3,
        "itl_mean_ms": statistics.mean(gaps) * 1e3,
        "err_p50_ms": statistics.median(errors) * 1e3,
        "err_p99_ms": errors[int(0.99 * (len(errors) - 1))] * 1e3,
        "server_cpu": server_cpu / wall,
        "server_us_per_token": server_cpu / tokens * 1e6,
        "client_cpu": client_cpu / wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--recipe", default="llama-3.1-8b/vllm@1")
    parser.add_argument("--hardware", default="h200")
    parser.add_argument("--streams", default="16,32,64,128,192,256,384,512")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        help="run the model this many times faster than real time (more tokens/s per stream)",
    )
    parser.add_argument("--threshold-ms", type=float, default=5.0)
    parser.add_argument("--server-cpu", type=int, default=0)
    parser.add_argument("--client-cpu", type=int, default=1)
    parser.add_argument(
        "--realtime",
        action="store_true",
        help="run server and client SCHED_FIFO (root): other processes cannot delay them",
    )
    args = parser.parse_args()

    isolate(args.client_cpu, args.realtime)
    spec = spec_for(args.recipe, args.hardware).model_copy(update={"time_scale": args.time_scale})
    held = None
    print(
        f"{args.recipe} on {args.hardware}; server on CPU {args.server_cpu}, client on "
        f"CPU {args.client_cpu}{' (SCHED_FIFO)' if args.realtime else ''}; "
        f"time scale x{args.time_scale:g}; {args.seconds:g} s per point, "
        "prompts 128, outputs 128"
    )
    print(
        "streams  tok/s  TTFT p50 ms  ITL mean ms  err p50 ms  err p99 ms  server CPU"
        "  µs/token  client CPU"
    )
    for streams in (int(s) for s in args.streams.split(",")):
        proc, url = start_server(spec, args.server_cpu, args.realtime)
        try:
            row = point(url, proc.pid, streams, args.seconds)
        finally:
            proc.terminate()
            proc.wait(10)
        ok = row["err_p99_ms"] < args.threshold_ms
        print(
            f"{streams:7d}  {row['tok_s']:5.0f}  {row['ttft_p50_ms']:11.1f}  "
            f"{row['itl_mean_ms']:11.2f}  "
            f"{row['err_p50_ms']:10.2f}  {row['err_p99_ms']:10.2f}  {row['server_cpu']:10.0%}  "
            f"{row['server_us_per_token']:8.1f}  {row['client_cpu']:10.0%}"
            f"{'' if ok else '  <- over'}",
            flush=True,
        )
        if not ok:
            break
        held = row
    if held is None:
        print(f"no point held an ITL error p99 under {args.threshold_ms:g} ms")
    else:
        print(
            f"held: {held['streams']:.0f} streams, {held['tok_s']:.0f} streamed tokens/s "
            f"with ITL error p99 {held['err_p99_ms']:.2f} ms"
        )


if __name__ == "__main__":
    main()
