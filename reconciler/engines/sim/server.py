"""Adapter: `denv sim serve` — an OpenAI-compatible HTTP server (aiohttp, one asyncio loop)
that behaves like a vLLM engine serving `SimSpec.model` on `SimSpec.hardware`.

Endpoints: `POST /v1/completions`, `POST /v1/chat/completions`, `GET /v1/models`,
`POST /tokenize` (vLLM's shape),
`GET /health` (503 until warm-up ends), `GET /server_info` and `GET /model_info` (what
sglang-router reads at registration; `GET /get_load` for its power-of-two policy),
`GET /metrics` (vLLM's names), `GET|POST /admin/faults`,
and `GET /admin/steps` (recent engine steps, for measuring the simulator against its model).
A prefill simulator also serves its bootstrap port (`pd.py`). The server prints nothing: its
caller passes a `log` callback, and `crash` for the injected crash fault.
"""

from __future__ import annotations

import asyncio
import random
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import hdrs, web
from pydantic import ValidationError

from reconciler.engines.model.perf import PerfModel
from reconciler.engines.model.scheduler import RequestTooLarge, Scheduler
from reconciler.engines.model.spec import SimSpec
from reconciler.engines.model.tokens import Answers, Tokenizer, block_hashes
from reconciler.engines.sim import info
from reconciler.engines.sim.admission import admit
from reconciler.engines.sim.engine import Engine, Stream
from reconciler.engines.sim.faults import CRASH_EXIT_CODE, Faults, FaultState
from reconciler.engines.sim.metrics import EngineMetrics
from reconciler.engines.sim.pd import Rooms, bootstrap_app, receive_kv
from reconciler.engines.sim.protocol import DONE, ApiError, GenRequest, Kind, Render, parse
from reconciler.engines.sim.sse import ChunkSink
from reconciler.engines.sim.tokenize import tokenize

KV_TIMEOUT_S = 60.0  # how long a decode request waits for its prefill's KV
SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}


@dataclass(frozen=True)
class Listening:
    url: str
    port: int
    bootstrap_port: int | None


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(1024)
    sock.setblocking(False)
    return sock


@web.middleware
async def _errors(request: web.Request, handler: Any) -> web.StreamResponse:
    try:
        response: web.StreamResponse = await handler(request)
        return response
    except ApiError as exc:
        return web.json_response(exc.body(), status=exc.status)


COUNTED_ROUTES = ("/v1/completions", "/v1/chat/completions")


def _counted(metrics: EngineMetrics) -> Any:
    """Count answers of the generation routes by status class ("2xx", "5xx"), as vLLM does."""

    @web.middleware
    async def count(request: web.Request, handler: Any) -> web.StreamResponse:
        status = 500  # a handler that raised anything but ApiError answered 500
        try:
            response: web.StreamResponse = await handler(request)
            status = response.status
            return response
        except web.HTTPException as exc:
            status = exc.status
            raise
        except asyncio.CancelledError:
            status = 499  # the client left: not the engine's error
            raise
        finally:
            if request.path in COUNTED_ROUTES:
                metrics.http_requests.labels(
                    request.method, f"{status // 100}xx", request.path
                ).inc()

    return count


class SimServer:
    def __init__(
        self,
        spec: SimSpec,
        faults: Faults | None = None,
        *,
        log: Callable[[str], None] = lambda _: None,
        crash: Callable[[int], None] = lambda _: None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.spec = spec
        self._log = log
        self._crash = crash
        self._clock = clock
        self._wall = wall_clock
        faults = faults or Faults()
        if faults.warmup_s is None:
            faults = faults.model_copy(update={"warmup_s": spec.warmup_s})
        self.faults = FaultState(faults, clock())
        self.model = PerfModel.from_spec(spec)
        self.metrics = EngineMetrics(spec.served_model, info.labels(spec))
        settings = spec.recipe.settings
        self.engine = Engine(
            Scheduler(self.model),
            time_scale=spec.time_scale,
            faults=self.faults,
            metrics=self.metrics,
            clock=clock,
            draft_tokens=self.model.draft_tokens,
        )
        self.tokenizer = Tokenizer(spec.model.vocab_size)
        self.answers = Answers(
            spec.weights, spec.model.vocab_size, settings.quantization, settings.kv_cache.dtype
        )
        self.context = settings.max_model_len or spec.model.max_context
        self.fingerprint = info.fingerprint(spec.time_scale)
        self.rooms = Rooms()
        self._rng = random.Random(spec.seed)
        self._runners: list[web.AppRunner] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._session: aiohttp.ClientSession | None = None
        self._unhung: asyncio.Event | None = None
        self.listening: Listening | None = None

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self, host: str, port: int, bootstrap_port: int | None = None) -> Listening:
        """Listen (port 0 picks a free one) and start the engine loop."""
        self._unhung = asyncio.Event()
        self._set_hang(self.faults.faults.hang)
        self._session = aiohttp.ClientSession()
        task = asyncio.create_task(self.engine.run())
        self._tasks.add(task)
        try:
            port = await self._serve(self.app(), host, port)
            if self.spec.role == "prefill" and bootstrap_port is not None:
                bootstrap_port = await self._serve(bootstrap_app(self.rooms), host, bootstrap_port)
            else:
                bootstrap_port = None
        except BaseException:
            await self.close()
            raise
        if self.spec.role == "prefill" and bootstrap_port is None:
            self._log("role prefill without a bootstrap port: decode workers cannot get KV")
        url = f"http://{f'[{host}]' if ':' in host else host}:{port}"
        self.listening = Listening(url, port, bootstrap_port)
        return self.listening

    async def _serve(self, app: web.Application, host: str, port: int) -> int:
        runner = web.AppRunner(
            app, handler_cancellation=True, access_log=None, shutdown_timeout=1.0
        )
        await runner.setup()
        self._runners.append(runner)
        sock = _listen(host, port)
        await web.SockSite(runner, sock, shutdown_timeout=1.0).start()
        bound: int = sock.getsockname()[1]
        return bound

    async def close(self) -> None:
        if self._unhung is not None:
            self._unhung.set()  # let requests parked by a hang finish
        for runner in reversed(self._runners):
            await runner.cleanup()
        self._runners.clear()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        if self._session is not None:
            await self._session.close()
            self._session = None
        self._log("closed")

    def app(self) -> web.Application:
        middlewares = [_counted(self.metrics), _errors]
        app = web.Application(middlewares=middlewares, client_max_size=64 * 1024 * 1024)
        route = app.router
        route.add_post("/v1/completions", self._completions)
        route.add_post("/v1/chat/completions", self._chat)
        route.add_get("/v1/models", self._models)
        route.add_post("/tokenize", self._tokenize)
        route.add_get("/health", self._health)
        for path in ("/server_info", "/get_server_info"):
            route.add_get(path, self._server_info)
        for path in ("/model_info", "/get_model_info"):
            route.add_get(path, self._model_info)
        route.add_get("/metrics", self._metrics)
        route.add_get("/get_load", self._load)
        route.add_get("/admin/faults", self._get_faults)
        route.add_post("/admin/faults", self._set_faults)
        route.add_get("/admin/steps", self._steps)
        return app

    # -- small endpoints ---------------------------------------------------------------

    async def _health(self, _: web.Request) -> web.Response:
        await self._wait_unhung()
        if not self.faults.ready(self._clock()):
            raise ApiError(503, "the engine is warming up")
        return web.Response()

    async def _models(self, _: web.Request) -> web.Response:
        return web.json_response(info.models(self.spec, self.context))

    async def _tokenize(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except ValueError as exc:
            raise ApiError(400, "the request body is not valid JSON") from exc
        answer = tokenize(body, self.tokenizer, self.spec.served_model, self.context)
        return web.json_response(answer)

    async def _server_info(self, _: web.Request) -> web.Response:
        bootstrap = self.listening.bootstrap_port if self.listening else None
        return web.json_response(info.server_info(self.spec, self.context, bootstrap))

    async def _model_info(self, _: web.Request) -> web.Response:
        return web.json_response(info.model_info(self.spec))

    async def _load(self, _: web.Request) -> web.Response:
        """SGLang's load report, which sglang-router's power-of-two policy polls."""
        return web.json_response([self.engine.load()])

    async def _metrics(self, _: web.Request) -> web.Response:
        body, content_type = self.metrics.render()
        return web.Response(body=body, headers={"Content-Type": content_type})

    async def _get_faults(self, _: web.Request) -> web.Response:
        return web.json_response(self.faults.view(self._clock()))

    async def _set_faults(self, request: web.Request) -> web.Response:
        try:
            patch = await request.json()
            if not isinstance(patch, dict):
                raise ValueError("faults must be a JSON object")
            self.faults.apply(patch, self._clock())
        except (ValueError, ValidationError) as exc:
            raise ApiError(400, f"bad faults: {exc}") from exc
        self._set_hang(self.faults.faults.hang)
        self.engine.poke()
        self._log(f"faults: {self.faults.faults.model_dump(exclude_defaults=True)}")
        return web.json_response(self.faults.view(self._clock()))

    async def _steps(self, _: web.Request) -> web.Response:
        """Recent steps, each `[due, delivered, duration, first_token, handed_out]`: when its
        tokens were due, when their hand-out began and when it ended (seconds on the server's
        monotonic clock), its modelled duration divided by the time scale, and the request ids
        it began answering."""
        steps = [
            [t.due, t.delivered, t.duration, t.first_token, t.handed_out] for t in self.engine.trace
        ]
        return web.json_response({"clock": "monotonic", "steps": steps})

    def _set_hang(self, hang: bool) -> None:
        if self._unhung is not None:
            self._unhung.clear() if hang else self._unhung.set()

    async def _wait_unhung(self) -> None:
        if self._unhung is not None:
            await self._unhung.wait()

    # -- generation --------------------------------------------------------------------

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, "completion")

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, "chat")

    async def _generate(self, request: web.Request, kind: Kind) -> web.StreamResponse:
        arrived = self._clock()
        await self._wait_unhung()
        if not self.faults.ready(self._clock()):
            raise ApiError(503, "the engine is warming up")
        try:
            body = await request.json()
        except ValueError as exc:
            raise ApiError(400, "the request body is not valid JSON") from exc
        req = parse(kind, body, self.spec.served_model)
        if not self.faults.admit():
            raise ApiError(500, "injected fault: this request fails (error rate)")
        admitted = admit(
            req,
            self.tokenizer,
            self.answers,
            limit=self.model.max_request_tokens,
            prefill_only=self.spec.role == "prefill",
            draw_seed=lambda: self._rng.getrandbits(63),
        )
        ids = admitted.prompt
        # the modelled HTTP, tokenizer and scheduling overhead, less what this took for real
        overhead = self.model.request_overhead_s / self.spec.time_scale
        await asyncio.sleep(max(0.0, arrived + overhead - self._clock()))
        if req.bootstrap is not None and self.spec.role == "decode":
            await self._receive_kv(req, len(ids))
        prefix = "cmpl" if kind == "completion" else "chatcmpl"
        request_id = f"{prefix}-{uuid.uuid4().hex}"
        render = Render(
            req,
            request_id,
            self.spec.served_model,
            int(self._wall()),
            self.fingerprint,
            self.tokenizer,
            admitted.answer,
        )
        count, reason = admitted.tokens, admitted.finish_reason
        try:
            hashes = block_hashes(ids)
            stream = self.engine.submit(
                request_id, arrived, len(ids), hashes, count, reason, req.ignore_eos
            )
        except RequestTooLarge as exc:
            raise ApiError(400, str(exc), "max_tokens") from exc
        try:
            if req.stream:
                response, complete = await self._stream(request, req, render, stream, len(ids))
                if not complete:
                    return response
            else:
                while not stream.finished:
                    await stream.wait()
                self._prefilled(req, len(ids))
                full = render.full(stream.emitted, reason, len(ids))
                response = web.json_response(full)
        except BaseException:
            self.engine.cancel(stream)
            raise
        if self.faults.answered_one():
            self._log(f"crashing after {self.faults.answered} answers (injected fault)")
            asyncio.get_running_loop().call_later(0.05, self._crash, CRASH_EXIT_CODE)
        return response

    async def _stream(
        self, request: web.Request, req: GenRequest, render: Render, stream: Stream, prompt: int
    ) -> tuple[web.StreamResponse, bool]:
        """The answer as server-sent events; False when the client left before its end."""
        response = web.StreamResponse(headers=SSE_HEADERS)
        await response.prepare(request)
        try:
            transport = request.transport
            if transport is None:
                raise ConnectionResetError("the client left")
            # the headers leave now (aiohttp holds them for the first write): the engine's
            # fan-out writes the chunks straight to the transport after them
            await response.write(render.role_chunk() if req.kind == "chat" else b"")
            chunked = response.headers.get(hdrs.TRANSFER_ENCODING) == "chunked"
            sink = ChunkSink(response, transport, render, stream, chunked=chunked)
            stream.sink = sink
            while not sink.ended:
                await stream.wait()
                await sink.catch_up()
            self._prefilled(req, prompt)
            usage = render.usage_chunk(prompt, sink.sent) if req.include_usage else b""
            await response.write_eof(usage + DONE)
        except ConnectionResetError:  # the client went away: free its slot, quietly
            self.engine.cancel(stream)
            return response, False
        return response, True

    async def _receive_kv(self, req: GenRequest, prompt_tokens: int) -> None:
        assert req.bootstrap is not None and self._session is not None
        await receive_kv(self._session, req.bootstrap, KV_TIMEOUT_S)
        delay = self.model.kv_transfer_s(prompt_tokens) / self.spec.time_scale
        if delay > 0:
            await asyncio.sleep(delay)

    def _prefilled(self, req: GenRequest, prompt_tokens: int) -> None:
        if self.spec.role == "prefill" and req.bootstrap is not None:
            room = req.bootstrap.room
            self.rooms.finish(room, {"room": room, "prompt_tokens": prompt_tokens})
