"""The fan-out's chunk sink: straight writes in HTTP chunked framing, and the handler's slow
path when the client is congested or the answer ends (fakes for the transport and response)."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from aiohttp import web

from reconciler.engines.model.tokens import Answers, Tokenizer
from reconciler.engines.sim.engine import Stream
from reconciler.engines.sim.protocol import Render, parse
from reconciler.engines.sim.sse import CONGESTED_BYTES, ChunkSink

VOCAB = 128_256


class FakeTransport:
    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.buffered = 0
        self.closing = False

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def is_closing(self) -> bool:
        return self.closing

    def get_write_buffer_size(self) -> int:
        return self.buffered


class FakeResponse:
    def __init__(self) -> None:
        self.written: list[bytes] = []

    async def write(self, data: bytes) -> None:
        self.written.append(data)


def setup(*, chunked: bool = True) -> tuple[ChunkSink, Stream, Render, FakeTransport, FakeResponse]:
    tokenizer = Tokenizer(VOCAB)
    answer = Answers("w", VOCAB).plan([1, 2, 3], 0.0, None)
    req = parse("completion", {"prompt": [1, 2, 3], "stream": True}, "m")
    render = Render(req, "cmpl-1", "m", 0, "fp", tokenizer, answer)
    stream = Stream("cmpl-1", 0.0, 3, "length")
    transport, response = FakeTransport(), FakeResponse()
    sink = ChunkSink(
        cast(web.StreamResponse, response),
        cast(Any, transport),
        render,
        stream,
        chunked=chunked,
    )
    stream.sink = sink
    return sink, stream, render, transport, response


def test_new_tokens_go_straight_out_in_chunked_framing_until_the_end() -> None:
    sink, stream, render, transport, _ = setup()
    stream.emitted = 1
    stream.notify()
    stream.emitted = 2
    stream.notify()
    assert not stream.event.is_set()  # the handler is not woken for plain tokens
    first, second = render.chunk(0, 1, None), render.chunk(1, 2, None)
    assert transport.written == [
        b"%x\r\n" % len(first) + first + b"\r\n",
        b"%x\r\n" % len(second) + second + b"\r\n",
    ]
    stream.emitted, stream.finished = 3, True
    stream.notify()
    assert stream.event.is_set() and sink.ended and sink.sent == 3  # the handler ends the body
    assert transport.written[-1].endswith(render.chunk(2, 3, "length") + b"\r\n")


def test_http_1_0_gets_the_events_unframed() -> None:
    _, stream, render, transport, _ = setup(chunked=False)
    stream.emitted = 2
    stream.notify()
    assert transport.written == [render.chunk(0, 2, None)]


def test_a_congested_or_gone_client_is_left_to_its_handler() -> None:
    sink, stream, render, transport, response = setup()
    transport.buffered = CONGESTED_BYTES + 1
    stream.emitted = 2
    stream.notify()
    assert stream.event.is_set() and transport.written == []
    asyncio.run(sink.catch_up())
    assert response.written == [render.chunk(0, 2, None)] and sink.sent == 2
    transport.buffered, transport.closing = 0, True
    stream.event.clear()
    stream.emitted = 3
    stream.notify()
    assert stream.event.is_set() and transport.written == []
