"""Light load for end-to-end tests: chat requests through an endpoint with the official
openai client, from worker threads, for as long as a `with` block runs — how many were
answered, and how each failure went."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import openai

from tests.fleet.conftest import wait_for


def ask(
    url: str,
    max_tokens: int = 8,
    model: str = "chat-8b",
    timeout: float = 10,
    stream: bool = False,
    prompt: str = "hello",
) -> str:
    """One chat request's answer; `stream`: read as it streams, every chunk to the last."""
    client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=timeout)
    messages: list[Any] = [{"role": "user", "content": prompt}]
    if stream:
        chunks = client.chat.completions.create(
            model=model, messages=messages, max_tokens=max_tokens, stream=True
        )
        return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    answer = client.chat.completions.create(model=model, messages=messages, max_tokens=max_tokens)
    return answer.choices[0].message.content or ""


@dataclass
class Load:
    answered: int = 0
    failed: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def more(self, count: int, what: str) -> None:
        """Wait until `count` more requests than now have been answered."""
        seen = self.answered
        wait_for(lambda: self.answered >= seen + count, timeout=30, what=what)


@contextmanager
def light_load(
    url: str,
    workers: int = 1,
    max_tokens: int = 8,
    model: str = "chat-8b",
    timeout: float = 10,
    stream: bool = False,
    distinct: bool = False,
) -> Iterator[Load]:
    """`workers` threads asking `url` one request after another (`max_tokens` each: fewer make
    more requests, hence more samples for an alarm, under a latency fault), each given up after
    `timeout` seconds (a failure), streamed with `stream`; stopped when the block ends,
    whatever happened in it. `distinct`: each prompt begins differently, so that a
    cache-aware router spreads them over its workers (the same prompt stays on one)."""
    load, stop = Load(), threading.Event()

    def run() -> None:
        while not stop.is_set():
            try:
                prompt = f"{uuid.uuid4().hex} hello" if distinct else "hello"
                ask(url, max_tokens, model, timeout, stream, prompt)
                with load._lock:
                    load.answered += 1
            except openai.OpenAIError as exc:
                with load._lock:
                    load.failed.append(repr(exc))
                stop.wait(0.1)  # a refused connection must not become a busy loop

    threads = [threading.Thread(target=run, daemon=True) for _ in range(workers)]
    for thread in threads:
        thread.start()
    try:
        yield load
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
