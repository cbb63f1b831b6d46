"""What denv's load generator costs, and how fast it can send, side by side with GuideLLM.

A minimal streaming server (raw asyncio, HTTP/1.1 keep-alive, chunked server-sent events: one
chunk per output token, each written in its own event-loop turn, then a usage event and
[DONE]) runs pinned to one CPU; each client runs pinned to another, against the same server
and the same Mooncake trace (128-token prompts, 64 output tokens).

- Closed loop at each concurrency: requests/s, the client's CPU per request, TTFT.
  denv's CPU is read inside its process around the run; GuideLLM's (a CLI with worker
  processes and a long start-up) as the difference between a short and a long run of the
  same load, which takes its start-up out.
- Open loop at rising rates: the highest rate each client sustains — answers keep pace with
  arrivals (at least 95 %) and, for denv, sends leave on time (median lag under 2 ms).

Medians over repeats; ratios GuideLLM ÷ denv. Figures and the command: docs/performance.md.

    .venv/bin/python benchmarks/loadgen_overhead.py --repeats 3
    .venv/bin/python benchmarks/loadgen_overhead.py --no-guidellm --rates 500,1000,2000

GuideLLM runs from its own venv (benchmarks/.venv-guidellm, git-ignored):
    python3 -m venv benchmarks/.venv-guidellm
    benchmarks/.venv-guidellm/bin/pip install guidellm==0.8.1
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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
GUIDELLM = ROOT / "benchmarks" / ".venv-guidellm" / "bin"
INPUT, OUTPUT, MODEL = 128, 64, "bench-model"
SERVER_CPU, CLIENT_CPU = 0, 1

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
    cpu, wall = time.process_time(), time.perf_counter()
    if job["mode"] == "closed":
        records = asyncio.run(closed_loop(target, lines, job["concurrency"]))
    else:
        first = lines[0].timestamp
        at = [(line.timestamp - first) / 1000 for line in lines]
        records = asyncio.run(open_loop(target, lines, at))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    ok = [r for r in records if r.ok]
    ttft = sorted(r.chunks_s[0] - r.sent_s for r in ok) or [float("nan")]
    lag = sorted(r.sent_s - (r.scheduled_s or r.sent_s) for r in records)
    span = max(r.done_s for r in ok) - min(r.sent_s for r in ok) if ok else float("nan")
    return {
        "requests": len(ok),
        "errors": len(records) - len(ok),
        "wall_s": wall,
        "cpu_s": cpu,
        "answers_per_s": len(ok) / span,
        "ttft_p50_ms": ttft[len(ttft) // 2] * 1000,
        "ttft_p99_ms": ttft[int(len(ttft) * 0.99)] * 1000,
        "lag_p50_ms": lag[len(lag) // 2] * 1000,
        "lag_p99_ms": lag[int(len(lag) * 0.99)] * 1000,
    }


def run_denv(job: dict[str, Any]) -> dict[str, Any]:
    argv = [sys.executable, __file__, "--denv-client", json.dumps(job)]
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=600, preexec_fn=_pin(CLIENT_CPU)
    )
    if done.returncode != 0:
        raise SystemExit(f"denv client failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# -- GuideLLM, from its own venv ----------------------------------------------------------

_TOKENIZER = """
import sys
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast
words = [f"w{i}" for i in range(300)]
corpus = [" ".join(words[(i * 7 + j) % 300] for j in range(40)) for i in range(400)]
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
alphabet = pre_tokenizers.ByteLevel.alphabet()
trainer = trainers.BpeTrainer(vocab_size=1000, initial_alphabet=alphabet, special_tokens=["<eos>"])
tok.train_from_iterator(corpus, trainer)
PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>").save_pretrained(sys.argv[1])
"""


def guidellm_tokenizer(folder: Path) -> Path:
    """GuideLLM needs a real tokenizer to make prompts, and reaches no hub here: a small
    byte-level BPE trained on the spot (reference/peer-figures.md)."""
    done = subprocess.run(
        [str(GUIDELLM / "python"), "-c", _TOKENIZER, str(folder)], capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"could not make GuideLLM's tokenizer:\n{done.stderr[-2000:]}")
    return folder


def run_guidellm(
    url: str, trace: Path, tokenizer: Path, profile: dict[str, Any], seconds: float, out: Path
) -> dict[str, Any]:
    """One GuideLLM run; its CPU (every process it started) from the kernel's accounting of
    waited-for children."""
    data = {"kind": "mooncake", "source": {"kind": "json_file", "path": str(trace)}}
    argv = [
        str(GUIDELLM / "guidellm"),
        "run",
        "--backend",
        f"kind=openai_http,target={url},model={MODEL}",
        "--data",
        json.dumps(data),
        "--tokenizer",
        f"kind=hf_auto,model={tokenizer}",
        "--profile",
        json.dumps(profile),
        "--constraint",
        f"kind=max_duration,seconds={seconds}",
        "--output",
        f"kind=json,path={out}",
        "--disable-console",
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "GUIDELLM__LOGGING__CONSOLE_LOG_LEVEL": "ERROR"}
    before = os.times()
    wall = time.perf_counter()
    done = subprocess.run(
        argv, capture_output=True, text=True, env=env, timeout=900, preexec_fn=_pin(CLIENT_CPU)
    )
    wall = time.perf_counter() - wall
    after = os.times()
    if done.returncode != 0:
        raise SystemExit(f"guidellm failed:\n{done.stderr[-3000:]}{done.stdout[-2000:]}")
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    return {"cpu_s": cpu, "wall_s": wall, **_guidellm_report(out)}


def _guidellm_report(path: Path) -> dict[str, Any]:
    bench = json.loads(path.read_text())["benchmarks"][0]
    metrics = bench["metrics"]
    totals = metrics["request_totals"]
    ttft = metrics["time_to_first_token_ms"]["successful"]
    seen = ttft["count"] > 0  # GuideLLM leaves it empty when chunks come back to back
    return {
        "requests": int(totals["successful"]),
        "errors": int(totals["errored"]),
        "answers_per_s": totals["successful"] / bench["duration"],
        "ttft_p50_ms": ttft["percentiles"]["p50"] if seen else float("nan"),
        "ttft_p99_ms": ttft["percentiles"]["p99"] if seen else float("nan"),
    }


# -- the points ---------------------------------------------------------------------------


def closed_point(
    url: str, work: Path, tokenizer: Path | None, concurrency: int, seconds: float
) -> dict[str, Any]:
    """denv and (when `tokenizer`) GuideLLM at one concurrency."""
    probe = write_trace(work / "probe.jsonl", max(200, 20 * concurrency))
    rate = run_denv({"url": url, "trace": str(probe), "mode": "closed", "concurrency": concurrency})
    count = max(int(rate["requests"] / rate["wall_s"] * seconds), 50 * concurrency)
    trace = write_trace(work / f"closed-{concurrency}.jsonl", count)
    denv = run_denv({"url": url, "trace": str(trace), "mode": "closed", "concurrency": concurrency})
    denv["cpu_ms_per_request"] = denv["cpu_s"] / denv["requests"] * 1000
    denv["requests_per_s"] = denv["requests"] / denv["wall_s"]
    point: dict[str, Any] = {"concurrency": concurrency, "denv": denv}
    if tokenizer is not None:
        profile = {"kind": "concurrent", "streams": concurrency}
        big = write_trace(work / "guidellm.jsonl", 60000)
        short = run_guidellm(url, big, tokenizer, profile, seconds, work / "g-short.json")
        long = run_guidellm(url, big, tokenizer, profile, 2 * seconds, work / "g-long.json")
        extra = long["requests"] - short["requests"]
        long["cpu_ms_per_request"] = (long["cpu_s"] - short["cpu_s"]) / extra * 1000
        long["requests_per_s"] = long["answers_per_s"]
        long["startup_cpu_s"] = (
            short["cpu_s"] - short["requests"] * long["cpu_ms_per_request"] / 1000
        )
        point["guidellm"] = long
    return point


def sustains(result: dict[str, Any], rate: float, lag: bool) -> bool:
    """Answers keep pace with arrivals, and (denv, which records it) the median send leaves
    on time: a client that cannot keep up falls behind by more with every request."""
    kept_pace = result["errors"] == 0 and result["answers_per_s"] >= 0.95 * rate
    return kept_pace and (not lag or result["lag_p50_ms"] < 2.0)


def highest_rate(
    url: str, work: Path, tokenizer: Path | None, rates: list[float], seconds: float
) -> dict[str, Any]:
    """The highest of `rates` each client sustains (stops at the first it does not)."""
    found: dict[str, Any] = {"denv": None, "guidellm": None, "runs": []}
    denv_on, guide_on = True, tokenizer is not None
    for rate in rates:
        trace = write_trace(work / f"open-{rate:g}.jsonl", int(rate * seconds), rate)
        run: dict[str, Any] = {"rate": rate}
        if denv_on:
            run["denv"] = run_denv({"url": url, "trace": str(trace), "mode": "open"})
            if sustains(run["denv"], rate, lag=True):
                found["denv"] = rate
            else:
                denv_on = False
        if guide_on and tokenizer is not None:
            profile = {"kind": "constant", "rate": rate}
            run["guidellm"] = run_guidellm(url, trace, tokenizer, profile, seconds, work / "g.json")
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
    """Markdown tables: medians over repeats."""
    lines = [
        "| concurrency | client | requests/s | client CPU per request | TTFT p50 | TTFT p99 |",
        "|---|---|---|---|---|---|",
    ]
    for at in zip(*points, strict=True):
        for tool in ("denv", "guidellm"):
            runs = [p[tool] for p in at if tool in p]
            if not runs:
                continue
            lines.append(
                f"| {at[0]['concurrency']} | {tool} | "
                f"{_median([r['requests_per_s'] for r in runs]):,.0f} | "
                f"{_median([r['cpu_ms_per_request'] for r in runs]):.3f} ms | "
                f"{_median([r['ttft_p50_ms'] for r in runs]):.2f} ms | "
                f"{_median([r['ttft_p99_ms'] for r in runs]):.2f} ms |"
            )
        pair = [p for p in at if "guidellm" in p]
        if pair:
            cpu = _median(
                [
                    p["guidellm"]["cpu_ms_per_request"] / p["denv"]["cpu_ms_per_request"]
                    for p in pair
                ]
            )
            rps = _median(
                [p["denv"]["requests_per_s"] / p["guidellm"]["requests_per_s"] for p in pair]
            )
            lines.append(
                f"| {at[0]['concurrency']} | ratio | denv {rps:.1f}× the requests/s | "
                f"GuideLLM {cpu:.1f}× the CPU | | |"
            )
    for tool in ("denv", "guidellm"):
        best = [r[tool] for r in rates if r[tool] is not None]
        if best:
            lines.append(
                f"\nhighest sustained open-loop rate, {tool}: {_median(best):,.0f} requests/s"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", default="1,64", help="closed-loop levels")
    parser.add_argument("--rates", default="50,100,200,400,800,1200,1600,2400,3200")
    parser.add_argument("--seconds", type=float, default=5.0, help="length of each point")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-guidellm", action="store_true")
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
    use_guidellm = not args.no_guidellm
    if use_guidellm and not (GUIDELLM / "guidellm").exists():
        raise SystemExit(f"no GuideLLM at {GUIDELLM} (see this file's docstring), or --no-guidellm")
    levels = [int(c) for c in args.concurrency.split(",")]
    rates = [float(r) for r in args.rates.split(",")]
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; "
        f"server on CPU {SERVER_CPU}, clients on CPU {CLIENT_CPU}",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as folder, server_process() as (url, server):
        work = Path(folder)
        tokenizer = guidellm_tokenizer(work / "tokenizer") if use_guidellm else None
        points, highest = [], []
        for repeat in range(args.repeats):
            points.append([closed_point(url, work, tokenizer, c, args.seconds) for c in levels])
            highest.append(highest_rate(url, work, tokenizer, rates, args.seconds))
            print(f"repeat {repeat + 1}/{args.repeats} done", flush=True)
        server_cpu = _cpu_seconds(server.pid)
    print(report(points, highest))
    print(f"\nserver CPU over the whole run: {server_cpu:.1f} s")
    if args.out:
        args.out.write_text(json.dumps({"closed": points, "open": highest}, indent=2))


if __name__ == "__main__":
    main()
