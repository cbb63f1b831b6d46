"""How many concurrent streams one `denv sim serve` process sustains on one core.

The simulator is pinned to one CPU; this script (the client: plain asyncio reading raw bytes,
pinned to another CPU, or `--client-procs` processes of it) keeps C streams busy back to back
for a fixed time per point and records when every token-carrying chunk arrives. The
simulator's `GET /admin/steps` then gives each engine step's modelled duration and the requests
whose first token it emitted; a request emits one token in every step after that (one-token
decode steps, no preemption at these loads), so the modelled gap before its k-th token is the
duration of the k-th step after its first. The ITL error of a gap is (measured gap) - (modelled
gap); a point holds when its p99 is under the threshold. Points grow in concurrency until one
fails.

    .venv/bin/python benchmarks/sim_capacity.py [--streams 16,32,64,...] [--seconds 10]

Prints one row per point and a closing line with the largest concurrency that held.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from reconciler.engines.sim.spec import SimSpec  # noqa: E402
from reconciler.spec.loader import open_repo  # noqa: E402

WARM_S = 2.0  # gaps before this are left out (connections opening, first prefills)
PROMPT_TOKENS, OUTPUT_TOKENS = 128, 128


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
    """Pin the calling process to one CPU and let it open as many sockets as the hard limit
    allows; with `realtime`, also run it SCHED_FIFO, so that other processes on that CPU
    cannot delay its wake-ups by a scheduler tick (root only)."""
    os.sched_setaffinity(0, {cpu})
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)  # a socket per stream: 1,024 is common
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
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


class Reader(asyncio.Protocol):
    """One keep-alive connection to the simulator, answers read as raw bytes: the client's cost
    per chunk is one `bytes.count` and one clock read, so one client core keeps up with the
    server's fan-out at a thousand streams (aiohttp's client parses every line in a task)."""

    EVENT = b"data: {"  # every event but [DONE]; the usage event carries no token
    END = b"\n\n\r\n0\r\n\r\n"  # the last event, then the chunked body's end

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.record = Record(0.0, [])
        self.done: asyncio.Future[None] | None = None
        self._carry = b""  # the tail of the bytes before, for a pattern split between reads
        self._header = True

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        if self.done is not None and not self.done.done():
            self.done.set_exception(exc or ConnectionError("the simulator closed the connection"))

    def send(self, request: bytes) -> asyncio.Future[None]:
        self.record = Record(time.monotonic(), [])
        self.done = asyncio.get_running_loop().create_future()
        self._carry, self._header = b"", True
        assert self.transport is not None
        self.transport.write(request)
        return self.done

    def data_received(self, data: bytes) -> None:
        now = time.monotonic()
        record = self.record
        if self._header:
            if not data.startswith(b"HTTP/1.1 200"):
                raise SystemExit(f"the simulator answered {data[:200]!r}")
            self._header = False
        seen = self._carry + data
        events = seen.count(self.EVENT)
        if events:
            if not record.id:
                at = seen.find(b'"id":"') + 6
                record.id = seen[at : seen.index(b'"', at)].decode()
            record.arrivals.extend([now] * events)
        self._carry = seen[-(len(self.END) - 1) :]
        if seen.endswith(self.END) and self.done is not None:
            self.done.set_result(None)


async def drive(
    url: str, first: int, streams: int, start_at: float, seconds: float, out: int, gap: float
) -> list[Record]:
    """Keep streams first..first+streams-1 busy, back to back, from `start_at` (monotonic) for
    `seconds`, stream s starting `gap` × s later; every request's chunk arrivals."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    records: list[Record] = []
    loop = asyncio.get_running_loop()
    stop_at = start_at + seconds

    async def stream(s: int) -> None:
        await asyncio.sleep(max(0.0, start_at + gap * s - time.monotonic()))
        transport, reader = await loop.create_connection(Reader, host, int(port))
        n = 0
        try:
            while time.monotonic() < stop_at:
                prompt = [(s * 7919 + n * 131 + i) % 100_000 + 1 for i in range(PROMPT_TOKENS)]
                body = json.dumps(
                    {"prompt": prompt, "max_tokens": out, "ignore_eos": True, "stream": True}
                ).encode()
                head = (
                    f"POST /v1/completions HTTP/1.1\r\nHost: {host}\r\n"
                    f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
                )
                await reader.send(head.encode() + body)
                record = reader.record
                record.arrivals = record.arrivals[:out]  # the usage event carries no token
                records.append(record)
                n += 1
        finally:
            transport.close()

    # The client's own garbage collection would stall every stream's reads at once and count
    # as the server's ITL error: off while it measures (a point allocates a few MB).
    gc.disable()
    try:
        await asyncio.gather(*(stream(s) for s in range(first, first + streams)))
    finally:
        gc.enable()
    return records


def worker(argv: list[str]) -> None:
    """A client process of its own (`--client-procs`): drives its share, prints its records."""
    url, first, streams, start_at, seconds, out, gap, cpu, realtime = argv
    isolate(int(cpu), realtime == "1")
    own0 = time.process_time()
    records = asyncio.run(
        drive(url, int(first), int(streams), float(start_at), float(seconds), int(out), float(gap))
    )
    rows = [[r.sent, r.id, r.arrivals] for r in records]
    print(json.dumps({"cpu": time.process_time() - own0, "records": rows}))


def stagger(streams: int) -> float:
    """Seconds between two streams' starts: no lockstep, and all of them in by WARM_S."""
    return min(0.005, WARM_S / streams)


def run_clients(
    url: str,
    streams: int,
    start_at: float,
    seconds: float,
    cpus: list[int],
    procs: int,
    realtime: bool,
) -> tuple[list[Record], float]:
    """Every stream's records and the clients' CPU seconds, from `procs` client processes
    pinned round-robin to `cpus` (one process: this one)."""
    if procs == 1:
        own0 = time.process_time()
        gap = stagger(streams)
        records = asyncio.run(drive(url, 0, streams, start_at, seconds, OUTPUT_TOKENS, gap))
        return records, time.process_time() - own0
    shares = [streams // procs + (1 if k < streams % procs else 0) for k in range(procs)]
    firsts = [sum(shares[:k]) for k in range(procs)]
    children = []
    for k in range(procs):
        argv = [sys.executable, __file__, "--client-worker", url, str(firsts[k]), str(shares[k])]
        argv += [repr(start_at), str(seconds), str(OUTPUT_TOKENS), str(stagger(streams))]
        argv += [str(cpus[k % len(cpus)]), "1" if realtime else "0"]
        children.append(subprocess.Popen(argv, stdout=subprocess.PIPE))
    records, cpu = [], 0.0
    for child in children:
        stdout, _ = child.communicate()
        if child.returncode != 0:
            raise SystemExit(f"a client process failed (exit {child.returncode})")
        result = json.loads(stdout)
        cpu += result["cpu"]
        records += [Record(sent, arrivals, rid) for sent, rid, arrivals in result["records"]]
    return records, cpu


def point(
    url: str, pid: int, streams: int, seconds: float, cpus: list[int], procs: int, realtime: bool
) -> dict[str, float]:
    cpu0, t0 = cpu_seconds(pid), time.monotonic()
    start_at = t0 + 0.5  # client processes start together
    records, client_cpu = run_clients(url, streams, start_at, seconds, cpus, procs, realtime)
    wall = time.monotonic() - t0
    server_cpu = cpu_seconds(pid) - cpu0
    with urllib.request.urlopen(url + "/admin/steps") as r:
        steps = json.loads(r.read())["steps"]
    first = {rid: i for i, step in enumerate(steps) for rid in step[3]}
    errors, gaps = [], []
    for record in records:
        s = first.get(record.id)
        got = record.arrivals
        if s is None or got[0] < start_at + WARM_S or s + len(got) > len(steps):
            continue
        for k in range(1, len(got)):
            gap = got[k] - got[k - 1]
            gaps.append(gap)
            errors.append(gap - steps[s + k][2])
    tokens = sum(len(r.arrivals) for r in records)
    ttft = [r.arrivals[0] - r.sent for r in records if r.arrivals and r.sent > start_at + WARM_S]
    if not ttft or not errors:
        raise SystemExit(
            f"{streams} streams: no request sent after the {WARM_S:g} s warm-up was answered "
            f"within {seconds:g} s; give the point more --seconds"
        )
    errors.sort()
    # How long the server took to hand each step's chunks out (the fan-out), after warm-up.
    fan_out = sorted(t[4] - t[1] for t in steps if t[1] >= start_at + WARM_S) or [0.0]
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
        "fan_out_p99_ms": fan_out[int(0.99 * (len(fan_out) - 1))] * 1e3,
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
    parser.add_argument(
        "--client-cpu", default="1", help="CPUs for the client processes, comma-separated"
    )
    parser.add_argument(
        "--client-procs",
        type=int,
        default=1,
        help="client processes (round-robin over --client-cpu), for more streams than one "
        "client core reads on time",
    )
    parser.add_argument(
        "--realtime",
        action="store_true",
        help="run server and client SCHED_FIFO (root): other processes cannot delay them",
    )
    args = parser.parse_args()

    cpus = [int(c) for c in args.client_cpu.split(",")]
    isolate(cpus[0], args.realtime)
    spec = spec_for(args.recipe, args.hardware).model_copy(update={"time_scale": args.time_scale})
    held = None
    print(
        f"{args.recipe} on {args.hardware}; server on CPU {args.server_cpu}, client on "
        f"CPU {args.client_cpu} ({args.client_procs} process(es))"
        f"{' (SCHED_FIFO)' if args.realtime else ''}; "
        f"time scale x{args.time_scale:g}; {args.seconds:g} s per point, "
        "prompts 128, outputs 128"
    )
    print(
        "streams  tok/s  TTFT p50 ms  ITL mean ms  err p50 ms  err p99 ms  server CPU"
        "  µs/token  client CPU  fan-out p99 ms"
    )
    for streams in (int(s) for s in args.streams.split(",")):
        proc, url = start_server(spec, args.server_cpu, args.realtime)
        try:
            row = point(
                url, proc.pid, streams, args.seconds, cpus, args.client_procs, args.realtime
            )
        finally:
            proc.terminate()
            proc.wait(10)
        ok = row["err_p99_ms"] < args.threshold_ms
        print(
            f"{streams:7d}  {row['tok_s']:5.0f}  {row['ttft_p50_ms']:11.1f}  "
            f"{row['itl_mean_ms']:11.2f}  "
            f"{row['err_p50_ms']:10.2f}  {row['err_p99_ms']:10.2f}  {row['server_cpu']:10.0%}  "
            f"{row['server_us_per_token']:8.1f}  {row['client_cpu']:10.0%}"
            f"  {row['fan_out_p99_ms']:14.2f}{'' if ok else '  <- over'}",
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
    if sys.argv[1:2] == ["--client-worker"]:
        worker(sys.argv[2:])
    else:
        main()
