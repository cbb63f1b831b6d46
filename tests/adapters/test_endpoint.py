"""The endpoint client against a loopback aiohttp server of the test's own: streamed events
stamped when their bytes arrive, error messages, the bearer token, an unreachable endpoint."""

from __future__ import annotations

import asyncio
import itertools
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from aiohttp import web

from reconciler.adapters.endpoint import UNREACHABLE, EndpointSession


class Server:
    def __init__(self) -> None:
        self.second_block = asyncio.Event()
        self.authorization: list[str | None] = []

    async def stream(self, request: web.Request) -> web.StreamResponse:
        self.authorization.append(request.headers.get("Authorization"))
        answer = web.StreamResponse()
        await answer.prepare(request)
        await answer.write(b"data: one\n\n: a comment\ndata: tw")  # an event cut in two
        await self.second_block.wait()
        await answer.write(b"o\n\ndata: [DONE]\n\n")
        return answer

    async def refuse(self, request: web.Request) -> web.Response:
        if request.query.get("json"):
            return web.json_response({"error": {"message": "no such model"}}, status=404)
        return web.Response(text="  plain failure \n", status=500)


@asynccontextmanager
async def served() -> AsyncIterator[tuple[Server, str]]:
    server = Server()
    app = web.Application()
    app.router.add_post("/v1/completions", server.stream)
    app.router.add_get("/v1/refuse", server.refuse)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield server, f"http://127.0.0.1:{port}/"
    await runner.cleanup()


def test_events_carry_the_time_their_block_arrived() -> None:
    ticks = itertools.count(1)
    found: list[tuple[float, bytes]] = []

    async def main() -> Server:
        async with (
            served() as (server, url),
            EndpointSession(url, api_key="k3y") as http,
            http.post("/v1/completions", data=b"{}") as answer,
        ):
            assert answer.status == 200
            async for at, payload in answer.events(lambda: float(next(ticks))):
                found.append((at, payload))
                server.second_block.set()
        return server

    server = asyncio.run(main())
    assert found == [(1.0, b"one"), (2.0, b"two"), (2.0, b"[DONE]")]
    assert server.authorization == ["Bearer k3y"]


@pytest.mark.parametrize(
    ("query", "status", "message"),
    [("?json=1", 404, "no such model"), ("", 500, "plain failure")],
    ids=["openai-error", "plain-body"],
)
def test_an_error_answer_gives_its_message(query: str, status: int, message: str) -> None:
    async def main() -> tuple[int, str]:
        async with (
            served() as (_, url),
            EndpointSession(url) as http,
            http.request("GET", "/v1/refuse" + query) as answer,
        ):
            return answer.status, await answer.message(800)

    assert asyncio.run(main()) == (status, message)


def test_an_endpoint_nobody_listens_on_is_unreachable() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]  # closed again before the request: nobody listens

    async def main() -> None:
        async with (
            EndpointSession(f"http://127.0.0.1:{port}", connect=5) as http,
            http.post("/v1/completions", json_body={}) as answer,
        ):
            await answer.drain()

    with pytest.raises(UNREACHABLE):
        asyncio.run(main())
