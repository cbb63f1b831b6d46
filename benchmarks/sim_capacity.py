"""How many concurrent streams one `denv sim serve` process sustains on one core.

The simulator is pinned to one CPU; this script (the client: plain asyncio reading raw bytes,
pinned to another CPU, or `--client-procs` processes of it) keeps C streams busy back to back
for a fixed time per point and records when every token-carrying chunk arrives. The
simulator's `GET /admin/steps` then gives each engine step's modelled duration and the requests
whose first token it emitted; a request emits one token in every step after that (one-token
decode steps, no preemption at these loads), so the modelled gap before its k-th token is the
duration of the k-th step after its first. The ITL error of a gap is (measured gap) - (modelled
gap); a point holds when its p99 is under the threshold. Every gap is measured twice: between
the client's reads, and between the kernel's receive timestamps of the same chunks
(SO_TIMESTAMPNS), which on loopback are taken in the server's send, before the client process
is woken: the first includes the client's delays, the second is the server's. Points grow in
concurrency until one fails at the kernel's receive.

    .venv/bin/python benchmarks/sim_capacity.py [--streams 16,32,64,...] [--seconds 10]

Prints one row per point (both p99s), where the latest 5% of steps were late, and a closing
line per timestamp with the largest concurrency that held on it.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import re
import resource
import socket
import statistics
import struct
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from reconciler.engines.model.spec import SimSpec  # noqa: E402
from reconciler.spec.loader import open_repo  # noqa: E402

# Linux's SO_TIMESTAMPNS (its SCM_TIMESTAMPNS cmsg has the same number), which Python's socket
# module does not name: a struct timespec of CLOCK_REALTIME with every read.
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
TIMESPEC = struct.Struct("@ll")
ANCILLARY = socket.CMSG_SPACE(TIMESPEC.size)
# How long the client's event loop keeps polling after a read before it blocks in epoll_wait
# (`--client-spin-us`; `--busy-client`: forever): a fan-out's sends on loopback then find it
# awake and do not pay for waking it, once per chunk, on the server's core.
SPIN_S = float(os.environ.get("SIM_CAPACITY_SPIN_S", "0"))
WARM_S = 2.0  # gaps before this are left out (connections opening, first prefills)
PROMPT_TOKENS, OUTPUT_TOKENS = 128, 128


@dataclass
class Record:
    sent: float  # monotonic seconds
    arrivals: list[float]  # monotonic seconds of every token-carrying chunk, read
    kernel: list[float]  # ... received by the kernel (its timestamp on the monotonic clock)
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


class Reader:
    """One keep-alive connection to the simulator, answers read as raw bytes off a non-blocking
    socket (`recvmsg` in a `loop.add_reader` callback): the client's cost per chunk is one
    `bytes.count` and two clock reads, so one client core keeps up with the server's fan-out at
    a thousand streams (aiohttp's client parses every line in a task).

    Each read also carries the kernel's receive timestamp (`SO_TIMESTAMPNS`): for TCP, the
    software receive time of the newest segment the read returned (CLOCK_REALTIME). On loopback
    the kernel takes it as the server's `write` hands the segment to the receiving socket, so
    it leaves out the client's own delays (its event loop busy sending new requests); the read
    time includes them. Both are kept, on the monotonic clock: the kernel's as the read time
    less the read's lag behind the timestamp (one clock's difference, so a step of the realtime
    clock does not move it)."""

    EVENT = b"data: {"  # every event but [DONE]; the usage event carries no token
    END = b"\n\n\r\n0\r\n\r\n"  # the last event, then the chunked body's end
    last_read = 0.0  # any reader's, for `spin`
    woken: asyncio.Future[None] | None = None  # `spin` waits on it for the next read

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.record = Record(0.0, [], [])
        self.done: asyncio.Future[None] | None = None
        self._carry = b""  # the tail of the bytes before, for a pattern split between reads
        self._header = True
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        asyncio.get_running_loop().add_reader(sock.fileno(), self._readable)

    def close(self) -> None:
        asyncio.get_running_loop().remove_reader(self.sock.fileno())
        self.sock.close()

    async def fetch(self, request: bytes) -> Record:
        """Send one request; its record once its answer has ended."""
        self.record = record = Record(time.monotonic(), [], [])
        self.done = done = asyncio.get_running_loop().create_future()
        self._carry, self._header = b"", True
        sent = self.sock.send(request)
        if sent < len(request):
            await asyncio.get_running_loop().sock_sendall(self.sock, request[sent:])
        await done
        return record

    def _fail(self, exc: BaseException) -> None:
        if self.done is not None and not self.done.done():
            self.done.set_exception(exc)

    def _readable(self) -> None:
        try:
            data, ancillary, _, _ = self.sock.recvmsg(65536, ANCILLARY)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._fail(exc)
            return
        now = Reader.last_read = time.monotonic()
        woken = Reader.woken
        if woken is not None and not woken.done():
            woken.set_result(None)
        lag = 0
        for level, kind, value in ancillary:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                sec, nsec = TIMESPEC.unpack(value)
                lag = time.time_ns() - sec * 1_000_000_000 - nsec
        if not data:
            asyncio.get_running_loop().remove_reader(self.sock.fileno())
            self._fail(ConnectionError("the simulator closed the connection"))
            return
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
            record.kernel.extend([now - lag * 1e-9] * events)
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
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        await loop.sock_connect(sock, (host, int(port)))
        reader = Reader(sock)
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
                record = await reader.fetch(head.encode() + body)
                record.arrivals = record.arrivals[:out]  # the usage event carries no token
                record.kernel = record.kernel[:out]
                records.append(record)
                n += 1
        finally:
            reader.close()

    # The client's own garbage collection would stall every stream's reads at once and count
    # as the server's ITL error: off while it measures (a point allocates a few MB).
    gc.disable()
    busy = asyncio.ensure_future(spin(SPIN_S)) if SPIN_S > 0 else None
    try:
        await asyncio.gather(*(stream(s) for s in range(first, first + streams)))
    finally:
        gc.enable()
        if busy is not None:
            busy.cancel()
    return records


async def spin(after_s: float) -> None:
    """Keep the event loop polling (epoll_wait with no timeout) instead of sleeping in it until
    `after_s` has passed without a read; then wait for the next read."""
    loop = asyncio.get_running_loop()
    while True:
        if time.monotonic() - Reader.last_read < after_s:
            await asyncio.sleep(0)
        else:
            Reader.woken = loop.create_future()
            await Reader.woken


def worker(argv: list[str]) -> None:
    """A client process of its own (`--client-procs`): drives its share, prints its records."""
    url, first, streams, start_at, seconds, out, gap, cpu, realtime = argv
    isolate(int(cpu), realtime == "1")
    own0 = time.process_time()
    records = asyncio.run(
        drive(url, int(first), int(streams), float(start_at), float(seconds), int(out), float(gap))
    )
    rows = [[r.sent, r.id, r.arrivals, r.kernel] for r in records]
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
        records += [Record(sent, got, kernel, rid) for sent, rid, got, kernel in result["records"]]
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
    errors: list[float] = []  # ITL error at the client's read
    kernel_errors: list[float] = []  # ... at the kernel's receive
    lags: list[float] = []  # how long each chunk waited in the client's socket
    gaps: list[float] = []
    by_step: dict[int, list[tuple[float, float, float]]] = {}  # step: (read, kernel errors, lag)
    merged = 0  # gaps inside one read (tokens of two steps): the kernel keeps the newest's time
    for record in records:
        s = first.get(record.id)
        got, ker = record.arrivals, record.kernel
        if s is None or got[0] < start_at + WARM_S or s + len(got) > len(steps):
            continue
        for k in range(1, len(got)):
            gap = got[k] - got[k - 1]
            model = steps[s + k][2]
            gaps.append(gap)
            errors.append(gap - model)
            lags.append(got[k] - ker[k])
            # Where one read returned two steps' tokens, the kernel's time of the older is
            # unknown: the gaps on both sides of it are left out at the kernel.
            if ker[k] == ker[k - 1] or (k + 1 < len(ker) and ker[k + 1] == ker[k]):
                merged += ker[k] == ker[k - 1]
                continue
            kernel_errors.append(ker[k] - ker[k - 1] - model)
            by_step.setdefault(s + k, []).append((errors[-1], kernel_errors[-1], lags[-1]))
    tokens = sum(len(r.arrivals) for r in records)
    ttft = [r.arrivals[0] - r.sent for r in records if r.arrivals and r.sent > start_at + WARM_S]
    if not ttft or not errors:
        raise SystemExit(
            f"{streams} streams: no request sent after the {WARM_S:g} s warm-up was answered "
            f"within {seconds:g} s; give the point more --seconds"
        )
    # How long the server took to hand each step's chunks out (the fan-out), after warm-up.
    fan_out = sorted(t[4] - t[1] for t in steps if t[1] >= start_at + WARM_S) or [0.0]
    # The steps whose median stream was latest at the read, the top 5%: where was it late?
    medians = sorted(
        (
            statistics.median(e[0] for e in seen),
            statistics.median(e[1] for e in seen),
            statistics.median(e[2] for e in seen),
            steps[i][1] - steps[i][0],  # the step's hand-out began this long after its due time
        )
        for i, seen in by_step.items()
        if len(seen) >= streams // 2  # a step every stream's decode took part in
    )
    top = medians[-max(1, len(medians) // 20) :]
    return {
        "streams": streams,
        "tok_s": tokens / wall,
        "ttft_p50_ms": statistics.median(ttft) * 1e3,
        "itl_mean_ms": statistics.mean(gaps) * 1e3,
        "err_p50_ms": statistics.median(errors) * 1e3,
        "read_err_p99_ms": p99(errors) * 1e3,
        "kernel_err_p50_ms": statistics.median(kernel_errors) * 1e3,
        "kernel_err_p99_ms": p99(kernel_errors) * 1e3,
        "lag_p50_ms": statistics.median(lags) * 1e3,
        "lag_p99_ms": p99(lags) * 1e3,
        "merged": merged / len(errors),
        "server_cpu": server_cpu / wall,
        "server_us_per_token": server_cpu / tokens * 1e6,
        "client_cpu": client_cpu / wall,
        "fan_out_p99_ms": fan_out[int(0.99 * (len(fan_out) - 1))] * 1e3,
        "top_steps": len(top),
        "top_read_ms": statistics.median(t[0] for t in top) * 1e3,
        "top_kernel_ms": statistics.median(t[1] for t in top) * 1e3,
        "top_lag_ms": statistics.median(t[2] for t in top) * 1e3,
        "top_start_ms": max(t[3] for t in top) * 1e3,
        "top_at_kernel": sum(t[1] > t[0] / 2 for t in top),
    }


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[int(0.99 * (len(ordered) - 1))]


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
    parser.add_argument(
        "--busy-client",
        action="store_true",
        help="diagnostic: the client polls instead of sleeping, so the server's sends on "
        "loopback do not wake it; its reads fall behind (with --realtime the kernel throttles "
        "it), the kernel-side figures stay valid",
    )
    parser.add_argument(
        "--client-spin-us",
        type=float,
        default=0.0,
        help="after each read the client keeps polling this long before it sleeps, so a "
        "fan-out's sends on loopback find it awake (0: it sleeps at once)",
    )
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
    global SPIN_S
    SPIN_S = float("inf") if args.busy_client else args.client_spin_us * 1e-6
    os.environ["SIM_CAPACITY_SPIN_S"] = repr(SPIN_S)  # for every client process too
    isolate(cpus[0], args.realtime)
    spec = spec_for(args.recipe, args.hardware).model_copy(update={"time_scale": args.time_scale})
    print(
        f"{args.recipe} on {args.hardware}; server on CPU {args.server_cpu}, client on "
        f"CPU {args.client_cpu} ({args.client_procs} process(es))"
        f"{' (SCHED_FIFO)' if args.realtime else ''}; "
        f"time scale x{args.time_scale:g}; {args.seconds:g} s per point, "
        "prompts 128, outputs 128"
    )
    print(
        "ITL error at the client's read (read) and at the kernel's receive (kernel, "
        "SO_TIMESTAMPNS); lag: a chunk's read after its receive"
    )
    print(
        "streams  tok/s  TTFT p50 ms  ITL mean ms  err p50 ms  read p99 ms  kernel p99 ms"
        "  lag p99 ms  server CPU  µs/token  client CPU  fan-out p99 ms"
    )
    # The largest point below which every point held, on each timestamp; points go on until
    # one fails at the kernel's receive (the server's), past the first that fails at the read.
    held: dict[str, dict[str, float] | None] = {"kernel": None, "read": None}
    failed: set[str] = set()
    for streams in (int(s) for s in args.streams.split(",")):
        proc, url = start_server(spec, args.server_cpu, args.realtime)
        try:
            row = point(
                url, proc.pid, streams, args.seconds, cpus, args.client_procs, args.realtime
            )
        finally:
            proc.terminate()
            proc.wait(10)
        over = [at for at in ("read", "kernel") if row[f"{at}_err_p99_ms"] >= args.threshold_ms]
        mark = f"  <- over at the {', '.join(over)}" if over else ""
        print(
            f"{streams:7d}  {row['tok_s']:5.0f}  {row['ttft_p50_ms']:11.1f}  "
            f"{row['itl_mean_ms']:11.2f}  {row['err_p50_ms']:10.2f}  "
            f"{row['read_err_p99_ms']:11.2f}  {row['kernel_err_p99_ms']:13.2f}  "
            f"{row['lag_p99_ms']:10.2f}  {row['server_cpu']:10.0%}  "
            f"{row['server_us_per_token']:8.1f}  {row['client_cpu']:10.0%}"
            f"  {row['fan_out_p99_ms']:14.2f}{mark}",
            flush=True,
        )
        print(
            f"         the {row['top_steps']:.0f} latest steps at the read (top 5%), their median "
            f"stream's ITL error: {row['top_read_ms']:.2f} ms at the read, "
            f"{row['top_kernel_ms']:.2f} ms at the kernel, read lag {row['top_lag_ms']:.2f} ms; "
            f"{row['top_at_kernel']:.0f} of them late at the kernel (over half the read's); "
            f"hand-out began at most {row['top_start_ms']:.2f} ms after due; "
            f"{row['merged']:.2%} of gaps inside one read",
            flush=True,
        )
        failed.update(over)
        for at in held:
            if at not in failed:
                held[at] = row
        if "kernel" in over:  # the server no longer holds: more streams will not either
            break
    for at, words in (("kernel", "at the kernel's receive"), ("read", "at the client's read")):
        row = held[at]
        if row is None:
            print(f"{words}: no point held an ITL error p99 under {args.threshold_ms:g} ms")
        else:
            print(
                f"held {words}: {row['streams']:.0f} streams, {row['tok_s']:.0f} streamed "
                f"tokens/s with ITL error p99 {row[f'{at}_err_p99_ms']:.2f} ms"
            )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--client-worker"]:
        worker(sys.argv[2:])
    else:
        main()
