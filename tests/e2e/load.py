"""Light load for end-to-end tests: chat requests through an endpoint with the official
openai client, from worker threads, for as long as a `with` block runs — how many were
answered, and how each failure went."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import openai

from tests.fleet.conftest import wait_for


def ask(url: str, max_tokens: int = 8, model: str = "chat-8b", timeout: float = 10) -> str:
    client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=timeout)
    answer = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "hello"}], max_tokens=max_tokens
    )
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
    url: str, workers: int = 1, max_tokens: int = 8, model: str = "chat-8b", timeout: float = 10
) -> Iterator[Load]:
    """`workers` threads asking `url` one request after another (`max_tokens` each: fewer make
    more requests, hence more samples for an alarm, under a latency fault), each given up after
    `timeout` seconds (a failure); stopped when the block ends, whatever happened in it."""
    load, stop = Load(), threading.Event()

    def run() -> None:
        while not stop.is_set():
            try:
                ask(url, max_tokens, model, timeout)
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
