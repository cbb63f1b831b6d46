"""Adapter: prefill/decode disaggregation between simulators, over HTTP.

A prefill simulator records each finished prefill under its bootstrap room and serves it on
its bootstrap port: `GET /kv/{room}?timeout=S` long-polls until that room's prefill is done
(200 with `{"room", "prompt_tokens"}`) or S seconds pass (404). A decode simulator given
`bootstrap_host/port/room` (as sglang-router sends them) polls there, waits the modelled KV
transfer time, and only then schedules the request.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from typing import Any

import aiohttp
from aiohttp import web

from reconciler.engines.sim.protocol import ApiError, Bootstrap

KEEP_ROOMS = 100_000  # finished rooms remembered, oldest forgotten first
POLL_S = 10.0  # one long-poll's length
RETRY_S = 0.05  # pause after a failed connection to the prefill's bootstrap port


class Rooms:
    """Prefills finished, by bootstrap room, and who waits for which."""

    def __init__(self) -> None:
        self._done: OrderedDict[int, dict[str, Any]] = OrderedDict()
        self._waiters: dict[int, list[asyncio.Future[dict[str, Any]]]] = {}

    def finish(self, room: int, info: dict[str, Any]) -> None:
        self._done[room] = info
        while len(self._done) > KEEP_ROOMS:
            self._done.popitem(last=False)
        for waiter in self._waiters.pop(room, []):
            if not waiter.done():
                waiter.set_result(info)

    async def wait(self, room: int, timeout_s: float) -> dict[str, Any] | None:
        if room in self._done:
            return self._done[room]
        waiter: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(room, []).append(waiter)
        try:
            return await asyncio.wait_for(waiter, timeout_s)
        except TimeoutError:
            return None
        finally:
            waiting = self._waiters.get(room, [])
            if waiter in waiting:
                waiting.remove(waiter)
                if not waiting:
                    del self._waiters[room]


def bootstrap_app(rooms: Rooms) -> web.Application:
    """What a prefill simulator serves on its bootstrap port."""

    async def kv(request: web.Request) -> web.Response:
        try:
            room = int(request.match_info["room"])
            timeout_s = min(float(request.query.get("timeout", POLL_S)), 60.0)
        except ValueError:
            return web.json_response({"error": "room and timeout must be numbers"}, status=400)
        info = await rooms.wait(room, timeout_s)
        if info is None:
            return web.json_response({"error": f"no prefill for room {room} yet"}, status=404)
        return web.json_response(info)

    async def health(_: web.Request) -> web.Response:
        return web.Response()

    app = web.Application()
    app.router.add_get("/kv/{room}", kv)
    app.router.add_get("/health", health)
    return app


async def receive_kv(
    session: aiohttp.ClientSession, bootstrap: Bootstrap, timeout_s: float
) -> dict[str, Any]:
    """The prefill's record of the room, once its prefill is done; ApiError after timeout_s."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    url = f"http://{bootstrap.host}:{bootstrap.port}/kv/{bootstrap.room}"
    while (left := deadline - loop.time()) > 0:
        poll = min(POLL_S, left)
        with contextlib.suppress(aiohttp.ClientError, TimeoutError):
            timeout = aiohttp.ClientTimeout(total=poll + 5)
            async with session.get(url, params={"timeout": f"{poll:.3f}"}, timeout=timeout) as r:
                if r.status == 200:
                    info: dict[str, Any] = await r.json()
                    return info
                if r.status == 404:
                    continue
        await asyncio.sleep(RETRY_S)
    raise ApiError(
        504,
        f"no KV from the prefill at {bootstrap.host}:{bootstrap.port} for room "
        f"{bootstrap.room} within {timeout_s:g}s",
    )
