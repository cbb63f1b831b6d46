"""What denv's load generator costs, and how fast it can send, side by side with GuideLLM,
AIPerf and inference-perf.

A minimal streaming server (raw asyncio, HTTP/1.1 keep-alive, chunked server-sent events: one
chunk per output token, each written in its own event-loop turn, then a usage event and
[DONE]) runs pinned to one CPU; each client runs pinned to another, against the same server
and the same load (128-token prompts, 64 output tokens; a Mooncake trace where the client
reads one).

- Closed loop at each concurrency: requests/s (each client's own report), the client's CPU
  per request, TTFT. Every client's CPU is counted the same way: the whole process tree in a
  cgroup of its own (loadgen_peers.py), as the difference between two runs of the same load,
  one twice the other, which takes start-up out.
- Open loop at rising rates (denv and GuideLLM): the highest rate each sustains — answers keep
  pace with arrivals (at least 95 %) and, for denv, sends leave on time (median lag under
  2 ms).

Medians over repeats; ratios peer ÷ denv within each repeat. Figures and the command:
docs/performance.md. Needs root (the cgroups) and the peers' venvs (loadgen_peers.py).

    .venv/bin/python benchmarks/loadgen_overhead.py --repeats 3
    .venv/bin/python benchmarks/loadgen_overhead.py --peers '' --rates 500,1000,2000
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

import loadgen_peers as peers  # noqa: E402
from loadgen_peers import measured  # noqa: E402

INPUT, OUTPUT, MODEL = 128, 64, "bench-model"
SERVER_CPU = 0

# -- the server -------------------------------------------------------------------------


def _chunk(data: bytes) -> bytes:
    """One piece of a chunked HTTP body."""
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def _event(body: dict[str, Any]) -> bytes:
    return _chunk(f"data: {json.dumps(body, separators=(',', ':'))}\n\n".encode())


_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
    b"Transfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n"
)
_TOKEN = _event({"id": "c", "object": "text_completion", "choices": [{"index": 0, "text": " t"}]})
_DONE = _chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"  # the last event, then the body's end


def _usage(prompt: int, output: int) -> bytes:
    usage = {"prompt_tokens": prompt, "completion_tokens": output, "total_tokens": prompt + output}
    return _event({"id": "c", "object": "text_completion", "choices": [], "usage": usage})


class _Http(asyncio.Protocol):
    """Just enough HTTP/1.1: requests with Content-Length bodies, answered in order."""

    def __init__(self) -> None:
        self.buffer = b""
        self.queue: asyncio.Queue[tuple[bytes, bytes]] = asyncio.Queue()
        self.task: asyncio.Task[None] | None = None
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        sock = transport.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.task = asyncio.get_running_loop().create_task(self._answer())

    def connection_lost(self, exc: Exception | None) -> None:
        if self.task is not None:
            self.task.cancel()

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while b"\r\n\r\n" in self.buffer:
            head, _, rest = self.buffer.partition(b"\r\n\r\n")
            found = re.search(rb"(?i)content-length:\s*(\d+)", head)
            length = int(found.group(1)) if found else 0
            if len(rest) < length:
                return
            self.buffer = rest[length:]
            self.queue.put_nowait((head.split(b" ", 2)[1], rest[:length]))

    async def _answer(self) -> None:
        assert self.transport is not None
        while True:
            path, body = await self.queue.get()
            if not path.startswith(b"/v1/"):  # health and the like
                self.transport.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
                continue
            if path == b"/v1/models":
                models = json.dumps({"object": "list", "data": [{"id": MODEL, "object": "model"}]})
                self.transport.write(
                    f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(models)}\r\n\r\n{models}".encode()
                )
                continue
            request = json.loads(body or b"{}")
            tokens = int(request.get("max_tokens") or request.get("max_completion_tokens") or 64)
            self.transport.write(_HEAD)
            for _ in range(tokens):
                self.transport.write(_TOKEN)
                await asyncio.sleep(0)  # one chunk a loop turn: they leave one by one
            self.transport.write(_usage(INPUT, tokens) + _DONE)


async def _serve(port: int) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(_Http, "127.0.0.1", port, backlog=4096)
    print(f"listening on {port}", flush=True)
    async with server:
        await server.serve_forever()


@contextlib.contextmanager
def server_process() -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    argv = [sys.executable, __file__, "--serve", str(port)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, preexec_fn=_pin(SERVER_CPU))
    try:
        assert proc.stdout is not None
        proc.stdout.readline()
        yield f"http://127.0.0.1:{port}", proc
    finally:
        proc.terminate()
        proc.wait(10)


def _pin(cpu: int) -> Any:
    return lambda: os.sched_setaffinity(0, {cpu % (os.cpu_count() or 1)})


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of a live process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- the trace --------------------------------------------------------------------------


def write_trace(path: Path, count: int, rate: float | None = None) -> Path:
    """`count` requests of 128 prompt tokens (one block each, none shared) and 64 output
    tokens; every `1 / rate` seconds, or all at 0 (closed loop ignores timestamps)."""
    with path.open("w") as out:
        for i in range(count):
            stamp = round(i * 1000 / rate, 3) if rate else 0
            line = {"timestamp": stamp, "input_length": INPUT, "output_length": OUTPUT}
            out.write(json.dumps({**line, "hash_ids": [i]}) + "\n")
    return path


# -- denv's client, run in its own pinned process ----------------------------------------


def _denv_client(job: dict[str, Any]) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT))
    from reconciler.bench.loadgen import Target, closed_loop, open_loop
    from reconciler.bench.traffic import read_trace

    lines = read_trace(Path(job["trace"]))
    target = Target(url=job["url"], model=MODEL, timeout_s=60)
    began = time.perf_counter()
    if job["mode"] == "closed":
        records = asyncio.run(closed_loop(target, lines, job["concurrency"]))
    else:
        first = lines[0].timestamp
        at = [(line.timestamp - first) / 1000 for line in lines]
        records = asyncio.run(open_loop(target, lines, at))
    duration = time.perf_counter() - began
    ok = [r for r in records if r.ok]
    ttft = sorted(r.chunks_s[0] - r.sent_s for r in ok) or [float("nan")]
    lag = sorted(r.sent_s - (r.scheduled_s or r.sent_s) for r in records)
    span = max(r.done_s for r in ok) - min(r.sent_s for r in ok) if ok else float("nan")
    return {
        "requests": len(ok),
        "errors": len(records) - len(ok),
        "duration_s": duration,  # the run, without the interpreter's start
        "answers_per_s": len(ok) / span,
        "ttft_p50_ms": ttft[len(ttft) // 2] * 1000,
        "ttft_p99_ms": ttft[int(len(ttft) * 0.99)] * 1000,
        "lag_p50_ms": lag[len(lag) // 2] * 1000,
        "lag_p99_ms": lag[int(len(lag) * 0.99)] * 1000,
    }


def run_denv(job: dict[str, Any]) -> dict[str, Any]:
    """One run of denv's client in its own process, its CPU counted as every client's is."""
    run = measured([sys.executable, __file__, "--denv-client", json.dumps(job)])
    result: dict[str, Any] = json.loads(run.stdout.strip().splitlines()[-1])
    return {**result, "cpu_s": run.cpu_s, "wall_s": run.wall_s}


# -- the points ---------------------------------------------------------------------------

Report = dict[str, Any]


def difference(short: Report, long: Report) -> Report:
    """The long run's figures, with the CPU per request from the difference between two runs
    of the same load, one twice the other: start-up (imports, tokenizer, worker processes)
    cancels out, the same way for every client."""
    extra = long["requests"] - short["requests"]
    per_request = (long["cpu_s"] - short["cpu_s"]) / extra
    return {
        **long,
        "requests_per_s": long["requests"] / long["duration_s"],
        "cpu_ms_per_request": per_request * 1000,
        "startup_cpu_s": short["cpu_s"] - short["requests"] * per_request,
        "hung": short.get("hung", 0) + long.get("hung", 0),
    }


def closed_point(
    url: str, work: Path, clients: list[str], concurrency: int, seconds: float
) -> dict[str, Any]:
    """Every client in `clients` at one concurrency. A client bounded by a request count runs
    a probe of max(200, 20 C) requests, then N and 2 N requests, N its probe's rate times
    `seconds`; GuideLLM (bounded by time) runs `seconds` and twice that."""
    c = concurrency

    def count_bound(run: Callable[[int], Report]) -> Report:
        probe = run(max(200, 20 * c))
        n = max(int(probe["requests"] / probe["duration_s"] * seconds), 20 * c)
        return difference(run(n), run(2 * n))

    def trace(n: int) -> Path:
        return write_trace(work / f"closed-{n}.jsonl", n)

    runs: dict[str, Callable[[], Report]] = {
        "denv": lambda: count_bound(
            lambda n: run_denv(
                {"url": url, "trace": str(trace(n)), "mode": "closed", "concurrency": c}
            )
        ),
        "guidellm": lambda: difference(
            *(
                peers.guidellm(
                    url,
                    MODEL,
                    write_trace(work / "guidellm.jsonl", 60000),
                    work,
                    {"kind": "concurrent", "streams": c},
                    t,
                )
                for t in (seconds, 2 * seconds)
            )
        ),
        "aiperf": lambda: count_bound(lambda n: peers.aiperf(url, MODEL, trace(n), work, c, n)),
        "inference-perf": lambda: count_bound(
            lambda n: peers.inference_perf(url, MODEL, work, c, n)
        ),
    }
    return {"concurrency": c, **{client: runs[client]() for client in clients}}


def sustains(result: dict[str, Any], rate: float, lag: bool) -> bool:
    """Answers keep pace with arrivals, and (denv, which records it) the median send leaves
    on time: a client that cannot keep up falls behind by more with every request."""
    kept_pace = result["errors"] == 0 and result["answers_per_s"] >= 0.95 * rate
    return kept_pace and (not lag or result["lag_p50_ms"] < 2.0)


def highest_rate(
    url: str, work: Path, guidellm: bool, rates: list[float], seconds: float
) -> dict[str, Any]:
    """The highest of `rates` denv (and GuideLLM) sustain (each stops at the first it does
    not)."""
    found: dict[str, Any] = {"denv": None, "guidellm": None, "runs": []}
    denv_on, guide_on = True, guidellm
    for rate in rates:
        trace = write_trace(work / f"open-{rate:g}.jsonl", int(rate * seconds), rate)
        run: dict[str, Any] = {"rate": rate}
        if denv_on:
            run["denv"] = run_denv({"url": url, "trace": str(trace), "mode": "open"})
            if sustains(run["denv"], rate, lag=True):
                found["denv"] = rate
            else:
                denv_on = False
        if guide_on:
            profile = {"kind": "constant", "rate": rate}
            answer = peers.guidellm(url, MODEL, trace, work, profile, seconds)
            run["guidellm"] = {**answer, "answers_per_s": answer["requests"] / answer["duration_s"]}
            if sustains(run["guidellm"], rate, lag=False):
                found["guidellm"] = rate
            else:
                guide_on = False
        found["runs"].append(run)
        if not (denv_on or guide_on):
            break
    return found


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def report(points: list[list[dict[str, Any]]], rates: list[dict[str, Any]]) -> str:
    """Markdown tables: medians over repeats; each peer's ratios against denv in the same
    repeat."""
    lines = [
        "| concurrency | client | requests/s | client CPU per request | start-up CPU "
        "| TTFT p50 | TTFT p99 |",
        "|---|---|---|---|---|---|---|",
    ]
    for at in zip(*points, strict=True):
        c = at[0]["concurrency"]
        for tool in CLIENTS:
            runs = [p[tool] for p in at if tool in p]
            if not runs:
                continue
            lines.append(
                f"| {c} | {tool} | "
                f"{_median([r['requests_per_s'] for r in runs]):,.0f} | "
                f"{_median([r['cpu_ms_per_request'] for r in runs]):.2f} ms | "
                f"{_median([r['startup_cpu_s'] for r in runs]):.1f} s | "
                f"{_median([r['ttft_p50_ms'] for r in runs]):.2f} ms | "
                f"{_median([r['ttft_p99_ms'] for r in runs]):.2f} ms |"
            )
        for tool in CLIENTS[1:]:
            pair = [p for p in at if tool in p]
            if not pair:
                continue
            cpu = _median(
                [p[tool]["cpu_ms_per_request"] / p["denv"]["cpu_ms_per_request"] for p in pair]
            )
            rps = _median([p["denv"]["requests_per_s"] / p[tool]["requests_per_s"] for p in pair])
            lines.append(
                f"| {c} | ratio | denv {rps:.1f}× {tool}'s requests/s | "
                f"{tool} {cpu:.1f}× the CPU | | | |"
            )
    hung = sum(p[tool]["hung"] for at in points for p in at for tool in CLIENTS if tool in p)
    lines.append(f"\nruns that never ended, killed and run again: {hung}")
    for tool in ("denv", "guidellm"):
        best = [r[tool] for r in rates if r[tool] is not None]
        if best:
            lines.append(
                f"\nhighest sustained open-loop rate, {tool}: {_median(best):,.0f} requests/s"
            )
    return "\n".join(lines)


CLIENTS = ("denv", "guidellm", "aiperf", "inference-perf")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", default="1,64", help="closed-loop levels")
    parser.add_argument("--rates", default="50,100,200,400,800,1200,1600,2400,3200")
    parser.add_argument("--seconds", type=float, default=5.0, help="length of each point")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--peers", default="guidellm,aiperf,inference-perf", help="peers beside denv, or ''"
    )
    parser.add_argument("--no-open-loop", action="store_true")
    parser.add_argument("--out", type=Path, help="write every figure as JSON here")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--denv-client", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        asyncio.run(_serve(args.serve))
        return
    if args.denv_client is not None:
        print(json.dumps(_denv_client(json.loads(args.denv_client))))
        return
    chosen = [p for p in args.peers.split(",") if p]
    for peer in chosen:
        if peer not in peers.VENVS:
            raise SystemExit(f"--peers: no peer {peer!r}; one of {', '.join(peers.VENVS)}")
        if not peers.installed(peer):
            raise SystemExit(f"no {peer} at {peers.VENVS[peer]} (see benchmarks/loadgen_peers.py)")
    levels = [int(c) for c in args.concurrency.split(",")]
    rates = [] if args.no_open_loop else [float(r) for r in args.rates.split(",")]
    versions = ", ".join(f"{p} {peers.version(p)}" for p in chosen)
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; "
        f"server on CPU {SERVER_CPU}, clients on CPU {peers.CLIENT_CPU}; {versions or 'no peers'}",
        flush=True,
    )
    clients = ["denv", *chosen]
    with tempfile.TemporaryDirectory() as folder, server_process() as (url, server):
        work = Path(folder)
        if chosen:
            peers.tokenizer(work)
        points, highest = [], []
        for repeat in range(args.repeats):
            points.append([closed_point(url, work, clients, c, args.seconds) for c in levels])
            if rates:
                highest.append(highest_rate(url, work, "guidellm" in chosen, rates, args.seconds))
            print(f"repeat {repeat + 1}/{args.repeats} done", flush=True)
        server_cpu = _cpu_seconds(server.pid)
    print(report(points, highest))
    print(f"\nserver CPU over the whole run: {server_cpu:.1f} s")
    if args.out:
        args.out.write_text(json.dumps({"closed": points, "open": highest}, indent=2))


if __name__ == "__main__":
    main()
