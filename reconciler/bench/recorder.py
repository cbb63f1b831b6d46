"""Adapter: the recording proxy behind `denv traffic record` — an aiohttp server in front of
an OpenAI-compatible endpoint that passes every request and answer through (streams event by
event, as they arrive) and writes one Mooncake trace line per answered generation request:
arrival time, the engine's token counts and the prompt's block ids. Prompt and answer text
stay in memory for the life of a request and are never written or logged. Token ids of text
prompts come from upstream's `/tokenize` (vLLM's shape), asked alongside the request."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import IO

import aiohttp
from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy

from reconciler.bench.traffic import canonical_line, write_trace
from reconciler.bench.traffic_blocks import BlockNames, recorded_line
from reconciler.bench.traffic_wire import (
    EventSplitter,
    Intent,
    Usage,
    body_usage,
    event_usage,
    intent,
)
from reconciler.errors import DenvError
from reconciler.spec.base import Spec
from reconciler.spec.result import TrafficLine

# Headers about one connection, not the message (RFC 9110 §7.6.1), and those aiohttp sets
# itself for the body it sends (its length and encoding may differ from what came in).
_HOP_BY_HOP = frozenset(
    (
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "content-encoding",
    )
)
SHUTDOWN_S = 5.0  # on stop, answers in progress get this long to finish (and be recorded)
MAX_BODY = 256 * 1024 * 1024  # long-context prompts as JSON token lists run to megabytes


class RecordCounts(Spec):
    recorded: int = 0
    passed: int = 0  # other requests (models, health, …), passed through
    unrecorded: dict[str, int] = {}  # generation requests passed through unrecorded, by why


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(1024)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


def _headers(headers: CIMultiDictProxy[str]) -> CIMultiDict[str]:
    return CIMultiDict((k, v) for k, v in headers.items() if k.lower() not in _HOP_BY_HOP)


class Recorder:
    """Start with `start(host, port)`, stop with `close()`; lines are appended as requests
    finish (so a crash keeps them) and the file is rewritten in arrival order on close."""

    def __init__(
        self,
        upstream: str,
        out: Path,
        *,
        log: Callable[[str], None] = lambda _: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.upstream = upstream.rstrip("/")
        self.out = out
        self._log = log
        self._clock = clock
        self._names = BlockNames()
        self._lines: list[TrafficLine] = []
        self._unrecorded: Counter[str] = Counter()
        self._passed = 0
        self._started: float | None = None  # arrival of the first generation request
        self._file: IO[str] | None = None
        self._session: aiohttp.ClientSession | None = None
        self._runner: web.AppRunner | None = None
        self._tokenize_warned: set[str | None] = set()  # kinds of request warned about

    @property
    def counts(self) -> RecordCounts:
        return RecordCounts(
            recorded=len(self._lines), passed=self._passed, unrecorded=dict(self._unrecorded)
        )

    async def start(self, host: str, port: int) -> str:
        """Listen (port 0 picks a free one); the URL clients should use."""
        try:
            self._file = self.out.open("w", encoding="utf-8")
        except OSError as exc:
            raise DenvError(f"{self.out}: cannot write the shape file: {exc}") from exc
        connector = aiohttp.TCPConnector(limit=0)  # as many upstream requests as clients send
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10)
        self._session = aiohttp.ClientSession(connector=connector, timeout=timeout)
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_route("*", "/{tail:.*}", self._proxy)
        self._runner = web.AppRunner(
            app, access_log=None, handler_cancellation=True, shutdown_timeout=SHUTDOWN_S
        )
        await self._runner.setup()
        try:
            sock = _listen(host, port)
        except OSError as exc:
            await self.close()
            raise DenvError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
        await web.SockSite(self._runner, sock).start()
        bound: int = sock.getsockname()[1]
        return f"http://{f'[{host}]' if ':' in host else host}:{bound}"

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self._file is not None:
            self._file.close()
            self._file = None
            write_trace(sorted(self._lines, key=lambda line: line.timestamp), self.out)

    # -- one request -------------------------------------------------------------------

    async def _proxy(self, request: web.Request) -> web.StreamResponse:
        assert self._session is not None
        raw = await request.read()
        arrived = self._clock()
        plan = Intent(raw) if request.method != "POST" else intent(request.path, raw)
        if plan.kind is None:
            self._passed += 1
        elif self._started is None:
            self._started = arrived
        ids: asyncio.Task[list[int] | None] | None = None
        if plan.kind is not None and plan.skip is None:
            ids = asyncio.create_task(self._prompt_ids(plan))
        try:
            upstream = await self._session.request(
                request.method,
                self.upstream + request.path_qs,
                headers=_headers(request.headers),
                data=plan.body,
                allow_redirects=False,
            )
        except (aiohttp.ClientError, OSError) as exc:
            if ids is not None:
                ids.cancel()
            self._not_recorded(plan, "upstream unreachable")
            error = {"error": {"message": f"upstream unreachable: {exc}", "code": 502}}
            return web.json_response(error, status=502)
        streamed = upstream.content_type == "text/event-stream"
        try:
            if streamed:
                response, usage, whole = await self._relay_stream(request, upstream, plan)
            else:
                body = await upstream.read()
                response = web.Response(
                    status=upstream.status, headers=_headers(upstream.headers), body=body
                )
                whole = True
                usage = body_usage(body) if plan.kind is not None else None
            # Recorded before the answer ends: a shutdown waits for answers in progress,
            # not for what a handler does after them.
            if ids is not None:
                reason = self._record(arrived, upstream.status, usage, whole, await ids)
                self._not_recorded(plan, reason)
            elif plan.skip is not None:
                self._not_recorded(plan, plan.skip)
        except BaseException as exc:
            upstream.close()  # stop the upstream request too
            if ids is not None:
                ids.cancel()
            left = isinstance(exc, asyncio.CancelledError)
            self._not_recorded(plan, "client left" if left else "upstream broke off the answer")
            raise
        finally:
            upstream.release()
        if streamed and whole:
            with contextlib.suppress(ConnectionResetError):
                await response.write_eof()
        return response

    async def _relay_stream(
        self, request: web.Request, upstream: aiohttp.ClientResponse, plan: Intent
    ) -> tuple[web.StreamResponse, Usage | None, bool]:
        """Events to the client as they come, unchanged, less the usage chunk the recorder
        asked for; False when the client left before the end. The caller ends the answer."""
        response = web.StreamResponse(status=upstream.status, headers=_headers(upstream.headers))
        await response.prepare(request)
        splitter, usage = EventSplitter(), None
        try:
            async for data in upstream.content.iter_any():
                kept = []
                for event in splitter.feed(data):
                    found, usage_only = event_usage(event)
                    usage = found or usage
                    if not (usage_only and plan.strip_usage):
                        kept.append(event)
                if kept:
                    await response.write(b"".join(kept))
            if rest := splitter.rest():
                await response.write(rest)
        except ConnectionResetError:
            return response, usage, False
        return response, usage, True

    async def _prompt_ids(self, plan: Intent) -> list[int] | None:
        if plan.prompt_ids is not None:
            return plan.prompt_ids
        assert self._session is not None and plan.tokenize is not None
        try:
            async with self._session.post(
                self.upstream + "/tokenize", json=plan.tokenize
            ) as answer:
                status = answer.status
                body = await answer.json(content_type=None) if status == 200 else None
        except (aiohttp.ClientError, OSError, ValueError):
            status, body = 0, None
        tokens = body.get("tokens") if isinstance(body, dict) else None
        if isinstance(tokens, list) and all(type(t) is int for t in tokens):
            return tokens
        if plan.kind not in self._tokenize_warned:
            self._tokenize_warned.add(plan.kind)
            self._log(
                f"upstream /tokenize answered {status or 'nothing'} for a {plan.kind} prompt: "
                f"such prompts are recorded with their lengths and blocks that share nothing"
            )
        return None

    def _record(
        self, arrived: float, status: int, usage: Usage | None, whole: bool, ids: list[int] | None
    ) -> str | None:
        """Write the request's line; or why not."""
        if status != 200:
            return f"upstream answered {status}"
        if not whole:
            return "client left"
        if usage is None or usage.prompt_tokens < 1 or usage.completion_tokens < 1:
            return "no token usage in the answer"
        assert self._started is not None and self._file is not None
        stamp = max(0, round((arrived - self._started) * 1000))
        line = recorded_line(stamp, ids, usage.prompt_tokens, usage.completion_tokens, self._names)
        self._lines.append(line)
        self._file.write(canonical_line(line) + "\n")
        self._file.flush()
        return None

    def _not_recorded(self, plan: Intent, reason: str | None) -> None:
        if plan.kind is not None and reason is not None:
            self._unrecorded[reason] += 1
