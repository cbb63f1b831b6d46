"""How many concurrent streams one `denv sim serve` process sustains on one core.

The simulator is pinned to one CPU; this script (the client: plain asyncio + aiohttp, pinned to
another CPU) keeps C streams busy back to back for a fixed time per point, records when every
token-carrying chunk arrives, then replays the same arrival times into a fresh Scheduler to get
each token's modelled time. The ITL error of a gap is (measured gap) - (modelled gap); a point
holds when its p99 is under the threshold. Points grow in concurrency until one fails.

    .venv/bin/python benchmarks/sim_capacity.py [--streams 16,32,64,...] [--seconds 10]

Prints one row per point and a closing line with the largest concurrency that held.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from reconciler.engines.sim.perf import PerfModel  # noqa: E402
from reconciler.engines.sim.scheduler import Scheduler  # noqa: E402
from reconciler.engines.sim.spec import SimSpec  # noqa: E402
from reconciler.engines.sim.tokens import block_hashes  # noqa: E402
from reconciler.spec.loader import open_repo  # noqa: E402

WARM_S = 2.0  # gaps before this are left out (connections opening, first prefills)


@dataclass
class Record:
    sent: float
    prompt: list[int]
    arrivals: list[float]


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


def start_server(spec: SimSpec, cpu: int) -> tuple[subprocess.Popen[bytes], str]:
    argv = [sys.executable, "-m", "reconciler", "sim", "serve", "--port", "0"]
    argv += ["--spec-json", spec.model_dump_json()]
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        cwd=ROOT,
        preexec_fn=lambda: os.sched_setaffinity(0, {cpu}),
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


async def drive(
    url: str, streams: int, seconds: float, prompt_len: int, out: int
) -> tuple[float, list[Record]]:
    """Keep `streams` requests in flight for `seconds`; every request's chunk arrivals."""
    records: list[Record] = []
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        start = time.monotonic()
        stop_at = start + seconds

        async def stream(s: int) -> None:
            await asyncio.sleep(0.005 * s)  # no lockstep
            n = 0
            while time.monotonic() < stop_at:
                prompt = [(s * 7919 + n * 131 + i) % 100_000 + 1 for i in range(prompt_len)]
                body = {"prompt": prompt, "max_tokens": out, "ignore_eos": True, "stream": True}
                record = Record(time.monotonic() - start, prompt, [])
                async with session.post(url + "/v1/completions", json=body) as r:
                    async for line in r.content:
                        if line.startswith(b"data: {"):
                            record.arrivals.append(time.monotonic() - start)
                records.append(record)
                n += 1

        await asyncio.gather(*(stream(s) for s in range(streams)))
        return time.monotonic() - start, records


def modelled(spec: SimSpec, records: Sequence[Record], out: int) -> list[list[float]]:
    """Each record's token times as the engine loop would produce them (seconds)."""
    model = PerfModel.from_spec(spec)
    scheduler = Scheduler(model)
    order = sorted(range(len(records)), key=lambda i: records[i].sent)
    joins = [records[i].sent + model.request_overhead_s / spec.time_scale for i in order]
    times: list[list[float]] = [[] for _ in records]
    now, k = 0.0, 0
    while k < len(order) or not scheduler.idle:
        while k < len(order) and joins[k] <= now:
            i = order[k]
            p = records[i].prompt
            scheduler.add(str(i), len(p), block_hashes(p), out)
            k += 1
        if scheduler.idle:
            now = joins[k]
            continue
        step = scheduler.step()
        assert step is not None
        now += step.duration_s / spec.time_scale
        for rid in step.tokens:
            times[int(rid)].append(now)
    return times


def point(spec: SimSpec, url: str, pid: int, streams: int, seconds: float) -> dict[str, float]:
    prompt_len, out = 128, 128
    cpu0 = cpu_seconds(pid)
    wall, records = asyncio.run(drive(url, streams, seconds, prompt_len, out))
    busy = (cpu_seconds(pid) - cpu0) / wall
    expected = modelled(spec, records, out)
    errors, gaps = [], []
    for record, model_times in zip(records, expected, strict=True):
        got = record.arrivals
        for k in range(1, min(len(got), len(model_times))):
            if got[k - 1] < WARM_S:
                continue
            gap = got[k] - got[k - 1]
            gaps.append(gap)
            errors.append(gap - (model_times[k] - model_times[k - 1]))
    tokens = sum(len(r.arrivals) for r in records)
    errors.sort()
    return {
        "streams": streams,
        "tok_s": tokens / wall,
        "itl_p50_ms": statistics.median(gaps) * 1e3,
        "err_p50_ms": statistics.median(errors) * 1e3,
        "err_p99_ms": errors[int(0.99 * (len(errors) - 1))] * 1e3,
        "server_cpu": busy,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--recipe", default="llama-3.1-8b/vllm@1")
    parser.add_argument("--hardware", default="h200")
    parser.add_argument("--streams", default="16,32,64,128,192,256,384,512")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--threshold-ms", type=float, default=5.0)
    parser.add_argument("--server-cpu", type=int, default=0)
    parser.add_argument("--client-cpu", type=int, default=1)
    args = parser.parse_args()

    os.sched_setaffinity(0, {args.client_cpu})
    spec = spec_for(args.recipe, args.hardware)
    held = None
    print(
        f"{args.recipe} on {args.hardware}; server on CPU {args.server_cpu}, client on "
        f"CPU {args.client_cpu}; {args.seconds:g} s per point, prompts 128, outputs 128"
    )
    print("streams  tok/s    ITL p50 ms  err p50 ms  err p99 ms  server CPU")
    for streams in (int(s) for s in args.streams.split(",")):
        proc, url = start_server(spec, args.server_cpu)
        try:
            row = point(spec, url, proc.pid, streams, args.seconds)
        finally:
            proc.terminate()
            proc.wait(10)
        ok = row["err_p99_ms"] < args.threshold_ms
        print(
            f"{streams:7d}  {row['tok_s']:7.0f}  {row['itl_p50_ms']:10.2f}  "
            f"{row['err_p50_ms']:10.2f}  {row['err_p99_ms']:10.2f}  {row['server_cpu']:9.0%}"
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
