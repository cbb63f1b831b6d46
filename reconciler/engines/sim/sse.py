"""Adapter: a streamed answer's chunks written straight to the client's socket from the engine's
fan-out — one `transport.write` per stream per step, in step order, with no task switch — and
the request's handler as the slow path: a congested client (aiohttp drains it), the end of the
body. The engine writes every stream's tokens of a step in one synchronous pass, so no request
parsing or handler wake-up slips in between two streams' chunks."""

from __future__ import annotations

import asyncio

from aiohttp import web

from reconciler.engines.sim.engine import Stream
from reconciler.engines.sim.protocol import Render

# Past this much of its answer unsent, a client is slow: its handler writes, and waits for it.
CONGESTED_BYTES = 64 * 1024


class ChunkSink:
    """`Stream.sink` for one streamed answer whose response headers are already sent."""

    def __init__(
        self,
        response: web.StreamResponse,
        transport: asyncio.Transport,
        render: Render,
        stream: Stream,
        *,
        chunked: bool,
    ) -> None:
        self._response = response
        self._transport = transport
        self._render = render
        self._stream = stream
        self._chunked = chunked  # HTTP/1.1 chunked transfer encoding (not for HTTP/1.0)
        self.sent = 0  # tokens written
        self.ended = False  # the chunk with the finish reason is written
        self._busy = False  # the handler is writing: this step's tokens wait for it

    def __call__(self) -> bool:
        """Write the stream's new tokens now; False leaves them (or the end) to the handler."""
        transport = self._transport
        if (
            self._busy
            or transport.is_closing()
            or transport.get_write_buffer_size() > CONGESTED_BYTES
        ):
            return False
        data = self._next()
        transport.write(b"%x\r\n%b\r\n" % (len(data), data) if self._chunked else data)
        return not self.ended  # the end: the handler adds usage and [DONE] and closes the body

    async def catch_up(self) -> None:
        """Write what the fan-out left, through aiohttp, which waits for a slow client."""
        stream = self._stream
        if self.ended or (stream.emitted <= self.sent and not stream.finished):
            return
        data = self._next()
        self._busy = True
        try:
            await self._response.write(data)
        finally:
            self._busy = False

    def _next(self) -> bytes:
        stream = self._stream
        reason = stream.finish_reason if stream.finished else None
        data = self._render.chunk(self.sent, stream.emitted, reason)
        self.sent = stream.emitted
        self.ended = stream.finished
        return data
