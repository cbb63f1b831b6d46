"""Test helper: a scripted OpenAI-style streaming server (aiohttp), run as its own process.

`POST /script` sets how the next requests are answered: the delay to the first output chunk,
the gap between chunks, tokens per chunk, and a plan of behaviours taken in turn by request
ordinal (ok, http_500, http_429, drop, stall, error_event, empty). Chunks are written at
absolute deadlines from the request's arrival (sleeping, then spinning the last 1.1 ms), so
delays never add up and the timer's lateness is taken out; `GET /log` gives, per
request, its arrival and every write time on the machine's monotonic clock (the same clock
`time.perf_counter` reads in any process on Linux), so a test can check what the client
measured against what the server did.

    python -m tests.bench.scripted   # prints "listening at http://127.0.0.1:PORT"
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.engines.sim.sims import ROOT, _read_line, stop_process


@dataclass
class Script:
    ttft_ms: float = 100.0
    itl_ms: float = 20.0
    tokens_per_chunk: int = 1
    plan: list[str] = field(default_factory=lambda: ["ok"])
    usage: bool = True


@dataclass
class Served:
    path: str
    arrived: float
    writes: list[float] = field(default_factory=list)
    body: dict[str, Any] = field(default_factory=dict)


class ScriptedServer:
    def __init__(self) -> None:
        self.script = Script()
        self.log: list[Served] = []

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/script", self._set_script)
        app.router.add_get("/log", self._get_log)
        app.router.add_post("/v1/completions", self._answer)
        app.router.add_post("/v1/chat/completions", self._answer)
        return app

    async def _set_script(self, request: web.Request) -> web.Response:
        self.script = Script(**await request.json())
        self.log.clear()
        return web.json_response({"ok": True})

    async def _get_log(self, _: web.Request) -> web.Response:
        return web.json_response(
            [
                {"path": s.path, "arrived": s.arrived, "writes": s.writes, "body": s.body}
                for s in self.log
            ]
        )

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        arrived = time.perf_counter()
        body = await request.json()
        served = Served(request.path, arrived, body=body)
        self.log.append(served)
        script = self.script
        behaviour = script.plan[(len(self.log) - 1) % len(script.plan)]
        if behaviour.startswith("http_"):
            status = int(behaviour.removeprefix("http_"))
            error = {"error": {"message": f"scripted {status}", "code": status}}
            return web.json_response(error, status=status)
        chat = request.path.endswith("/chat/completions")
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        if chat:  # the role chunk: no output yet
            await response.write(
                _event({"choices": [{"delta": {"role": "assistant", "content": ""}}]})
            )
        tokens = int(body.get("max_tokens", 16))
        chunks = -(-tokens // script.tokens_per_chunk)
        if behaviour == "empty":
            chunks = 0
        for k in range(chunks):
            await _sleep_until(arrived + (script.ttft_ms + k * script.itl_ms) / 1000)
            text = " tok" * min(script.tokens_per_chunk, tokens - k * script.tokens_per_chunk)
            delta = {"content": text} if chat else None
            choice = {"index": 0, "delta": delta} if chat else {"index": 0, "text": text}
            await response.write(_event({"choices": [choice]}))
            served.writes.append(time.perf_counter())
            if behaviour == "drop":
                assert request.transport is not None
                request.transport.close()
                return response
            if behaviour == "stall":
                await asyncio.sleep(30)
            if behaviour == "error_event" and k == 0:
                await response.write(_event({"error": {"message": "scripted failure"}}))
                break
        if script.usage:
            usage = {"prompt_tokens": 7, "completion_tokens": tokens if chunks else 0}
            await response.write(_event({"choices": [], "usage": usage}))
        await response.write(b"data: [DONE]\n\n")
        return response


SPIN_S = 0.0011  # asyncio's timer can wake 1 ms late (epoll counts whole ms): spin the rest


async def _sleep_until(deadline: float) -> None:
    left = deadline - time.perf_counter()
    if left > SPIN_S:
        await asyncio.sleep(left - SPIN_S)
    while time.perf_counter() < deadline:
        pass


def _event(body: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(body, separators=(',', ':'))}\n\n".encode()


@contextlib.contextmanager
def scripted_server() -> Iterator[str]:
    """The server in its own process on a free loopback port; stopped on the way out."""
    argv = [sys.executable, "-m", "tests.bench.scripted"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, cwd=ROOT)
    try:
        line = _read_line(proc, 30)
        found = re.search(r"at (http://\S+)", line)
        assert found, f"the scripted server did not start: {line!r}"
        yield found.group(1)
    finally:
        stop_process(proc)


async def _main() -> None:
    runner = web.AppRunner(ScriptedServer().app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    print(f"listening at http://127.0.0.1:{port}", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(_main())
