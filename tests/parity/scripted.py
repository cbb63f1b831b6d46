"""Test helpers: a scripted OpenAI-compatible server of the tests' own (aiohttp, on loopback,
in a thread) that answers each prompt with exactly the tokens and top logprobs a test gives,
and small suites written by the tests."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

# One answer: per position, the chosen token and the alternatives listed there (best first).
Steps = list[tuple[str, list[str]]]


def chat_body(steps: Steps, finish: str = "stop") -> dict[str, Any]:
    content = [
        {
            "token": token,
            "logprob": -0.1,
            "bytes": list(token.encode()),
            "top_logprobs": [{"token": t, "logprob": -0.1 * (i + 1)} for i, t in enumerate(top)],
        }
        for token, top in steps
    ]
    text = "".join(token for token, _ in steps)
    message = {"role": "assistant", "content": text}
    choice = {"index": 0, "message": message, "logprobs": {"content": content}}
    return {"object": "chat.completion", "choices": [choice | {"finish_reason": finish}]}


def completion_body(steps: Steps, finish: str = "stop") -> dict[str, Any]:
    logprobs = {
        "tokens": [token for token, _ in steps],
        "token_logprobs": [-0.1 for _ in steps],
        # a dict, as servers send it: its order says nothing, the logprobs do
        "top_logprobs": [
            {t: -0.1 * (i + 1) for i, t in reversed(list(enumerate(top)))} for _, top in steps
        ],
    }
    text = "".join(token for token, _ in steps)
    choice = {"index": 0, "text": text, "logprobs": logprobs, "finish_reason": finish}
    return {"object": "text_completion", "choices": [choice]}


@dataclass
class Scripted:
    """Answers keyed by prompt text (a completion's prompt, a chat's last message).
    `statuses` are answered first, one per generation request (e.g. [503] for one failure)."""

    answers: dict[str, Steps]
    statuses: list[int] = field(default_factory=list)
    no_logprobs: bool = False
    hold_until: int = 0  # hold the first requests until this many are in flight at once
    requests: int = 0
    in_flight: int = 0
    most_in_flight: int = 0
    _released: asyncio.Event | None = None

    async def _hold(self) -> None:
        if self._released is None:
            self._released = asyncio.Event()
        if self.in_flight >= self.hold_until:
            self._released.set()
        # the timeout only guards a broken test: the last request of a batch releases them
        await asyncio.wait_for(self._released.wait(), 10)

    async def _models(self, _: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "scripted"}]})

    async def _generate(self, request: web.Request) -> web.Response:
        self.requests += 1
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            if self.hold_until:
                await self._hold()
            return await self._answer(request)
        finally:
            self.in_flight -= 1

    async def _answer(self, request: web.Request) -> web.Response:
        if self.statuses:
            status = self.statuses.pop(0)
            return web.json_response({"error": {"message": f"scripted {status}"}}, status=status)
        body = await request.json()
        chat = "messages" in body
        key = body["messages"][-1]["content"] if chat else body["prompt"]
        steps = self.answers[key]
        answer = chat_body(steps) if chat else completion_body(steps)
        if self.no_logprobs:
            answer["choices"][0]["logprobs"] = None
        return web.json_response(answer)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/chat/completions", self._generate)
        app.router.add_post("/v1/completions", self._generate)
        return app


@contextlib.contextmanager
def serving(app: web.Application) -> Iterator[str]:
    """`app` on a free loopback port, served from a thread of its own; yields its URL."""
    loop = asyncio.new_event_loop()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    runner = web.AppRunner(app, access_log=None)
    loop.run_until_complete(runner.setup())
    loop.run_until_complete(web.SockSite(runner, sock).start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def write_suite(path: Path, prompts: dict[str, str], kind: str = "chat") -> Path:
    """A suite file with one prompt per (id, text); greedy, 8 tokens, top 5."""
    lines = []
    for pid, text in prompts.items():
        row: dict[str, Any] = {"id": pid, "kind": kind}
        if kind == "chat":
            row["messages"] = [{"role": "user", "content": text}]
        else:
            row["prompt"] = text
        lines.append(json.dumps(row | {"max_tokens": 8, "top_logprobs": 5}))
    path.write_text("\n".join(lines) + "\n")
    return path
