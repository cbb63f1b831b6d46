"""Adapter: the load generator — asyncio and the endpoint client (adapters/endpoint.py)
against an OpenAI-compatible endpoint.

Every request streams (`stream_options.include_usage`), asks for exactly the trace line's
output length (`max_tokens` with `ignore_eos`), and is recorded as a `RequestRecord`: when it
was sent, when each chunk carrying output arrived, the engine's usage, and how it failed.
Open loop sends at the trace's (scaled) timestamps whatever the server does; closed loop
keeps `concurrency` requests in flight. Nothing here computes a statistic or prints.

The hot path is kept small, so that what a run measures is the server: bodies are built
from cached blocks before the send time is taken, and the stream is split into lines and
searched with one regular expression; only usage and error events are parsed as JSON.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable, Sequence
from typing import Literal

from pydantic import Field, SecretStr, model_validator

from reconciler.adapters.endpoint import Answer, ClientError, EndpointSession
from reconciler.bench.prompts import PromptBuilder, PromptFormat
from reconciler.bench.records import ErrorKind, RequestRecord
from reconciler.bench.traffic import TraceLine
from reconciler.spec.base import Spec

Api = Literal["completions", "chat"]
OnRecord = Callable[[RequestRecord], None]
Clock = Callable[[], float]

# A chunk carries output when its text, content or reasoning is a non-empty string.
_OUTPUT = re.compile(rb'"(?:text|content|reasoning_content)"\s*:\s*"(?!")')
_USAGE = re.compile(rb'"usage"\s*:\s*\{')
_PATHS: dict[Api, str] = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}
_STREAMING = (
    '"ignore_eos":true,"temperature":0,"stream":true,"stream_options":{"include_usage":true}'
)
DETAIL_CHARS = 200


class Target(Spec):
    """Where requests go and in which form."""

    url: str = Field(pattern=r"^https?://")  # the server's root, without /v1
    model: str  # the served model name
    api: Api = "completions"
    prompt: PromptFormat = "token_ids"
    # tokens the engine's chat template adds: chat messages are that much shorter
    chat_overhead: int = Field(default=0, ge=0)
    timeout_s: float = Field(default=600.0, gt=0)  # nothing arrives this long: a timeout
    api_key: SecretStr | None = None

    @model_validator(mode="after")
    def _chat_is_text(self) -> Target:
        if self.api == "chat" and self.prompt != "text":
            raise ValueError("chat messages are text: use prompt 'text' with api 'chat'")
        return self


class Client:
    """One endpoint session against one target; `send` records one request."""

    def __init__(
        self, session: EndpointSession, target: Target, clock: Clock, started: float
    ) -> None:
        self.session = session
        self.target = target
        self.clock = clock
        self.started = started
        self.path = _PATHS[target.api]
        self.prompts = PromptBuilder(target.prompt)
        self._model = json.dumps(target.model)

    def body(self, line: TraceLine, index: int) -> bytes:
        head = f'{{"model":{self._model},"max_tokens":{line.output_length},{_STREAMING},'
        if self.target.api == "completions":
            return f'{head}"prompt":{self.prompts.json_value(line, index)}}}'.encode()
        length = max(1, line.input_length - self.target.chat_overhead)
        content = self.prompts.json_value(line, index, length)
        return f'{head}"messages":[{{"role":"user","content":{content}}}]}}'.encode()

    def now(self) -> float:
        return self.clock() - self.started

    async def send(
        self, index: int, line: TraceLine, body: bytes, scheduled_s: float | None = None
    ) -> RequestRecord:
        stream = _Stream()
        sent = self.now()
        try:
            async with self.session.post(self.path, data=body) as answer:
                if answer.status != 200:
                    message = await answer.message(DETAIL_CHARS * 4)
                    stream.fail(ErrorKind.HTTP, message, answer.status)
                else:
                    await self._read(answer, stream)
        except TimeoutError:
            stream.fail(ErrorKind.TIMEOUT, f"nothing arrived for {self.target.timeout_s:g} s")
        except ClientError as exc:
            kind = ErrorKind.STREAM if stream.started else ErrorKind.CONNECT
            stream.fail(kind, f"{type(exc).__name__}: {exc}")
        return RequestRecord(
            index=index,
            scheduled_s=scheduled_s,
            sent_s=sent,
            chunks_s=tuple(stream.chunks),
            done_s=self.now(),
            input_length=line.input_length,
            output_length=line.output_length,
            prompt_tokens=stream.prompt_tokens,
            output_tokens=stream.output_tokens,
            error=stream.error,
            status=stream.status,
            detail=stream.detail,
        )

    async def _read(self, answer: Answer, stream: _Stream) -> None:
        stream.started = True
        async for at, payload in answer.events(self.now):
            stream.event(payload, at)
        if stream.error is None and not stream.done:
            stream.fail(ErrorKind.STREAM, "the stream ended before [DONE]")
        elif stream.error is None and not stream.chunks:
            stream.fail(ErrorKind.EMPTY, "the stream carried no output")


class _Stream:
    """What one answer's events said so far."""

    def __init__(self) -> None:
        self.started = False
        self.done = False
        self.chunks: list[float] = []
        self.prompt_tokens: int | None = None
        self.output_tokens: int | None = None
        self.error: ErrorKind | None = None
        self.status: int | None = None
        self.detail: str | None = None

    def fail(self, kind: ErrorKind, detail: str, status: int | None = None) -> None:
        if self.error is None:
            self.error, self.status, self.detail = kind, status, detail[:DETAIL_CHARS]

    def event(self, payload: bytes, at: float) -> None:
        if payload == b"[DONE]":
            self.done = True
            return
        if _OUTPUT.search(payload):
            self.chunks.append(at)
        if _USAGE.search(payload) or b'"error"' in payload:
            self._parse(payload)

    def _parse(self, payload: bytes) -> None:
        try:
            event = json.loads(payload)
        except ValueError:
            return
        if not isinstance(event, dict):
            return
        usage = event.get("usage")
        if isinstance(usage, dict):
            self.prompt_tokens = _count(usage.get("prompt_tokens"), self.prompt_tokens)
            self.output_tokens = _count(usage.get("completion_tokens"), self.output_tokens)
        error = event.get("error")
        if error is not None:
            message = error.get("message") if isinstance(error, dict) else error
            self.fail(ErrorKind.SERVER, str(message))


def _count(value: object, default: int | None) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def session(target: Target) -> EndpointSession:
    """Connections without a pool limit (open loop must never wait for one), kept alive."""
    key = target.api_key.get_secret_value() if target.api_key is not None else None
    timeout = target.timeout_s
    return EndpointSession(target.url, api_key=key, limit=0, connect=timeout, read=timeout)


async def closed_loop(
    target: Target,
    lines: Sequence[TraceLine],
    concurrency: int,
    *,
    on_record: OnRecord = lambda _: None,
    clock: Clock = time.perf_counter,
) -> list[RequestRecord]:
    """`concurrency` clients, each sending the next line as soon as its last answer ends;
    the lines' timestamps are ignored. Records in trace order."""
    records: list[RequestRecord] = []
    order = iter(enumerate(lines))
    async with session(target) as http:
        client = Client(http, target, clock, clock())

        async def user() -> None:
            for index, line in order:
                body = client.body(line, index)
                record = await client.send(index, line, body)
                records.append(record)
                on_record(record)

        await asyncio.gather(*(user() for _ in range(concurrency)))
    return sorted(records, key=lambda r: r.index)


async def open_loop(
    target: Target,
    lines: Sequence[TraceLine],
    send_at_s: Sequence[float],
    *,
    on_record: OnRecord = lambda _: None,
    clock: Clock = time.perf_counter,
) -> list[RequestRecord]:
    """Each line sent at its time (seconds from the start), whether or not earlier answers
    have ended. Each body is built before its time comes; a send that leaves late shows as
    `sent_s` past `scheduled_s`. Records in trace order."""

    async with session(target) as http:
        client = Client(http, target, clock, clock())

        async def one(index: int, line: TraceLine, body: bytes, at: float) -> RequestRecord:
            record = await client.send(index, line, body, scheduled_s=at)
            on_record(record)
            return record

        tasks: list[asyncio.Task[RequestRecord]] = []
        try:
            for index, (line, at) in enumerate(zip(lines, send_at_s, strict=True)):
                body = client.body(line, index)
                wait = at - client.now()
                if wait > 0:
                    await asyncio.sleep(wait)
                tasks.append(asyncio.create_task(one(index, line, body, at)))
            return list(await asyncio.gather(*tasks))
        finally:
            for task in tasks:
                task.cancel()


async def prompt_format(target: Target) -> PromptFormat:
    """`token_ids` if the endpoint takes a token-id prompt on /v1/completions, else `text`
    (sglang-router 0.3.2 answers 422: its prompt is text or a list of texts)."""
    body = {"model": target.model, "prompt": [1000], "max_tokens": 1}
    async with session(target) as http, http.post(_PATHS["completions"], json_body=body) as answer:
        await answer.drain()
        return "text" if answer.status == 422 else "token_ids"
