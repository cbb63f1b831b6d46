"""The chaos run's clients and its fifth invariant: no request fails without an alarm seeing it.

One client a stage asks the stage's endpoint (its router) for one short completion after
another, not streamed (the official openai client, no retries, 10 s each), and keeps every
failure with when it was sent and when it ended. After every pass the run reads, from the
bot's lease note, the points its alarm watch scraped from each stage's routers (cumulative
requests and 5xx answers, restarts already added in). A failure is seen once a router point
of its stage, scraped after it ended, counts it: at every such point, the 5xx answers the
stage's routers gave since their first point must be at least the failures that had ended by
then. A router that restarts loses what it counted since its last scrape, and a request that
never reaches a router (refused, moved) is counted by none: both show as failures unseen.

Streams are not sent: a stream cut after its first token is counted by no router or engine
(docs/operate.md, "Not handled yet"), so this invariant is not checked for them.
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import openai

from reconciler.rollout.samples import track_from_json
from reconciler.rollout.series import ROUTERS

REQUEST_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Failure:
    stage: str
    endpoint: str
    sent: float  # Unix time, the bot's clock
    ended: float
    why: str


@dataclass
class Clients:
    """A client per stage, asking the endpoint `point()` last gave it; `stop()` ends them."""

    stages: tuple[str, ...]
    model: str
    failures: list[Failure] = field(default_factory=list)
    answered: int = 0
    endpoints: dict[str, str] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> None:
        for stage in self.stages:
            thread = threading.Thread(target=self._run, args=(stage,), daemon=True)
            thread.start()
            self._threads.append(thread)

    def point(self, endpoints: Mapping[str, str]) -> None:
        with self._lock:
            self.endpoints.update(endpoints)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=REQUEST_TIMEOUT_S + 5)

    def _run(self, stage: str) -> None:
        while not self._stop.is_set():
            with self._lock:
                url = self.endpoints.get(stage)
            if url is None:
                self._stop.wait(0.2)
                continue
            client = openai.OpenAI(
                base_url=f"{url}/v1", api_key="none", max_retries=0, timeout=REQUEST_TIMEOUT_S
            )
            sent = time.time()
            try:
                prompt = f"{uuid.uuid4().hex} hello"  # spread over the router's workers
                client.completions.create(model=self.model, prompt=prompt, max_tokens=8)
                with self._lock:
                    self.answered += 1
            except openai.APIStatusError as exc:
                self._failed(Failure(stage, url, sent, time.time(), f"HTTP {exc.status_code}"))
            except openai.OpenAIError as exc:
                self._failed(Failure(stage, url, sent, time.time(), type(exc).__name__))
            finally:
                client.close()

    def _failed(self, failure: Failure) -> None:
        with self._lock:
            self.failures.append(failure)
        self._stop.wait(0.1)  # a refused connection must not become a busy loop


@dataclass
class RouterPoints:
    """(stage key, router metrics URL) -> {Unix time: 5xx answered so far}: every point of the
    bot's router tracks seen in its notes, gathered pass after pass (the note keeps them
    thinned)."""

    points: dict[tuple[str, str], dict[float, float]] = field(default_factory=dict)

    def add(self, note: Mapping[str, Any] | None) -> None:
        rollout = ((note or {}).get("checks") or {}).get("rollout") or {}
        tracks = (rollout.get("alarms") or {}).get("tracks") or {}
        for key, by_url in tracks.items():
            for url, data in by_url.items():
                track = track_from_json(data)
                if track.engine in ROUTERS:
                    kept = self.points.setdefault((key, url), {})
                    kept.update({p.at: p.counters.get("error_rate", 0.0) for p in track.points})


@dataclass(frozen=True)
class Unseen:
    """A stage's failures that no router point counted: at most `short` at once (found at the
    point at Unix time `at`), and `late` that ended after its routers' last point."""

    short: int
    at: float
    late: int

    def describe(self, stage: str) -> str:
        when = time.strftime("%H:%M:%S", time.localtime(self.at))
        said = []
        if self.short:
            said.append(f"{self.short} failed request(s) no router point counted ({when})")
        if self.late:
            said.append(f"{self.late} failed request(s) after the routers' last point")
        return f"{stage}: " + "; ".join(said)


def unseen(
    failures: Iterable[Failure],
    points: RouterPoints,
    key_of: Callable[[str], str],
    final: bool = False,
) -> dict[str, Unseen]:
    """Stage -> what its routers' points missed: at every point, the 5xx its routers counted
    since their first point against its clients' failures ended by then; `final` (the clients
    stopped before the last pass): the failures no point came after too."""
    found = {}
    failures = list(failures)
    for stage in sorted({f.stage for f in failures}):
        ended = sorted(f.ended for f in failures if f.stage == stage)
        steps: list[tuple[float, float]] = []  # (at, 5xx counted since the track's last point)
        for (key, _), by_at in points.points.items():
            if key == key_of(stage):
                for (_, before), (at, after) in itertools.pairwise(sorted(by_at.items())):
                    steps.append((at, max(after - before, 0.0)))
        counted, short, where = 0.0, 0, 0.0
        for at, more in sorted(steps):
            counted += more
            missed = sum(1 for t in ended if t <= at) - round(counted)
            if missed > short:
                short, where = missed, at
        last = max((at for at, _ in steps), default=0.0)
        late = sum(1 for t in ended if t > last) if final else 0
        if short or late:
            found[stage] = Unseen(short, where, late)
    return found
