"""Adapter: the client of OpenAI-compatible endpoints, with aiohttp — every request denv sends
to an engine's or router's OpenAI API (the load generator, parity, the trials) goes through
`EndpointSession`.

What it owns: the session (pool size, timeouts), the bearer token, streamed answers split
into server-sent events stamped with the caller's clock when their bytes arrive, the message
of an error answer (OpenAI's `error.message`, else the body), and which exceptions mean the
endpoint could not be reached (`UNREACHABLE`) or may answer another try (`TRANSIENT`).
What a request asks and what its events mean stay with the caller.

aiohttp is a server as well: the simulator (engines/sim) and the recording proxy
(bench/recorder.py) serve with it and forward requests as they came; they are the only other
modules that import it (import-linter).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import aiohttp

# The endpoint could not be reached, or dropped the answer: nothing to read from it.
ClientError = aiohttp.ClientError
UNREACHABLE: tuple[type[Exception], ...] = (aiohttp.ClientError, TimeoutError)
# Failures another try may not have: refused or dropped connections, cut bodies, timeouts.
TRANSIENT: tuple[type[Exception], ...] = (
    aiohttp.ClientConnectionError,
    aiohttp.ClientPayloadError,
    TimeoutError,
)


class Answer:
    """One answer, read once: as text, as an error message, or as a stream of events."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response
        self.status = response.status

    async def text(self) -> str:
        return await self._response.text()

    async def drain(self) -> None:
        await self._response.read()

    async def message(self, limit: int) -> str:
        """An error answer's message (OpenAI's `error.message`, else the body's first
        `limit` characters)."""
        text = (await self._response.text(errors="replace"))[:limit]
        try:
            body = json.loads(text)
        except ValueError:
            return text.strip()
        error = body.get("error") if isinstance(body, dict) else None
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        return text.strip()

    async def events(self, clock: Callable[[], float]) -> AsyncIterator[tuple[float, bytes]]:
        """The payload of every `data:` line of a streamed answer, with `clock()` read once
        as each block of bytes arrives (the time of every event the block completes)."""
        pending = b""
        async for data in self._response.content.iter_any():
            at = clock()
            lines = (pending + data).split(b"\n")
            pending = lines.pop()
            for line in lines:
                if line.startswith(b"data:"):
                    yield at, line[5:].strip()


class EndpointSession:
    """Kept-alive connections to one OpenAI-compatible server (`base`: its root, without
    /v1). `limit`: connections at most (0: no limit, as an open loop needs); `total`,
    `connect`, `read`: seconds for a whole answer, a connection, and between bytes."""

    def __init__(
        self,
        base: str,
        *,
        api_key: str | None = None,
        limit: int = 0,
        total: float | None = None,
        connect: float | None = None,
        read: float | None = None,
    ) -> None:
        self.base = base.rstrip("/")
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key is not None else {}
        # built once: the load generator's hot path sends bodies it wrote as JSON itself
        self._data_headers = {**self._headers, "Content-Type": "application/json"}
        self._limit = limit
        self._timeout = aiohttp.ClientTimeout(total=total, sock_connect=connect, sock_read=read)
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> EndpointSession:
        connector = aiohttp.TCPConnector(limit=self._limit)
        self._session = aiohttp.ClientSession(connector=connector, timeout=self._timeout)
        return self

    async def __aexit__(self, *_: object) -> None:
        if self._session is not None:
            await self._session.close()

    @asynccontextmanager
    async def request(
        self, method: str, path: str, *, json_body: Any = None, data: bytes | None = None
    ) -> AsyncIterator[Answer]:
        """Send `json_body` (as JSON) or `data` (JSON already) to `base + path`."""
        assert self._session is not None, "use the session in `async with`"
        headers = self._data_headers if data is not None else self._headers
        async with self._session.request(
            method, self.base + path, json=json_body, data=data, headers=headers
        ) as response:
            yield Answer(response)

    def post(
        self, path: str, *, json_body: Any = None, data: bytes | None = None
    ) -> AbstractAsyncContextManager[Answer]:
        return self.request("POST", path, json_body=json_body, data=data)
