"""Pure logic: synthetic traffic shapes for the standard workloads, drawn with a seed.

Lengths come from the workload profiles (catalog/workloads.yaml, the one place they live).
Single requests (chat, rag, reasoning, batch) share `prefix_reuse` of each prompt as one common
prefix, as the simulator's prediction does. Agent and coding traffic is made of multi-turn
sessions: every session starts with one shared prefix (system prompt, tool definitions, code
context) and each turn resends the whole conversation so far plus new input, so a turn's
blocks repeat all full blocks of the session's previous prompt. docs/benchmarks.md gives the
parameters below and their sources."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from reconciler.catalog.workloads import profile_for
from reconciler.engines.model.kvcache import BLOCK_TOKENS
from reconciler.errors import UsageError
from reconciler.spec.result import TrafficLine
from reconciler.spec.workload import LengthDistribution, TokenRange, WorkloadProfile

WORKLOADS = ("chat", "agent", "rag", "coding", "batch")


@dataclass(frozen=True)
class Draw:
    """A normal distribution clipped to [low, high]."""

    mean: int
    stddev: int
    low: int
    high: int


@dataclass(frozen=True)
class Sessions:
    """Multi-turn traffic: what sessions look like beyond the profile's lengths."""

    shared_prefix: int  # tokens every session's first prompt starts with
    turn_input: Draw  # new tokens a later turn adds: a user message or tool results
    turns: tuple[int, int]  # turns per session, drawn uniformly (bounds included)
    concurrent: int  # sessions in progress at once, their turns interleaved
    first_from_profile: bool  # True: the first prompt's length is the profile's input draw


SESSIONS: dict[str, Sessions] = {
    # denv's estimate: a system prompt with tool definitions of 8 blocks; tool results of
    # 600±300 tokens a step; 2-8 steps. Fitted to the profile's 8,000-token mean input and
    # 0.8 prefix reuse (docs/benchmarks.md measures both).
    "agent": Sessions(4096, Draw(600, 300, 50, 4000), (2, 8), 16, first_from_profile=False),
    # inference-perf's code-generation workload (via GuideLLM's catalog): a 3,000-token shared
    # prefix, 1500±1200 (100-10,000) new tokens a turn; the first prompt (the code context)
    # is the profile's input draw. Turns per session are denv's (upstream: 540, truncated).
    "coding": Sessions(3000, Draw(1500, 1200, 100, 10000), (2, 8), 8, first_from_profile=True),
}


@dataclass(frozen=True)
class _Request:
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...]


class _Blocks:
    """Hash ids as small integers in order of first use; one shared-prefix run."""

    def __init__(self) -> None:
        self._next = 0
        self._shared: list[int] = []

    def new(self, count: int) -> list[int]:
        start, self._next = self._next, self._next + count
        return list(range(start, start + count))

    def shared(self, count: int) -> list[int]:
        while len(self._shared) < count:
            self._shared += self.new(1)
        return self._shared[:count]


def _clipped(rng: random.Random, mean: float, stddev: float, low: int, high: int) -> int:
    return int(min(max(round(rng.gauss(mean, stddev)), low), high))


def _length(rng: random.Random, dist: LengthDistribution, bounds: TokenRange) -> int:
    return _clipped(rng, dist.mean, dist.stddev, bounds.min, bounds.max)


def _blocks(tokens: int) -> int:
    return math.ceil(tokens / BLOCK_TOKENS)


def _single(profile: WorkloadProfile, rng: random.Random) -> Iterator[_Request]:
    blocks = _Blocks()
    gen = profile.generator
    while True:
        prompt = _length(rng, gen.input, profile.input_tokens)
        output = _length(rng, gen.output, profile.output_tokens)
        full = prompt // BLOCK_TOKENS
        shared = min(round(prompt * profile.prefix_reuse / BLOCK_TOKENS), full)
        ids = blocks.shared(shared) + blocks.new(_blocks(prompt) - shared)
        yield _Request(prompt, output, tuple(ids))


class _Session:
    """One conversation: its prompt grows by the previous answer and the new input."""

    def __init__(self, turns: int) -> None:
        self.turns_left = turns
        self.context = 0  # tokens of the previous prompt and its answer
        self.ids: list[int] = []
        self.full_blocks = 0  # full blocks of the previous prompt: the next turn repeats them


def _multi_turn(
    profile: WorkloadProfile, shape: Sessions, rng: random.Random
) -> Iterator[_Request]:
    blocks = _Blocks()
    limit = profile.input_tokens.max
    active: list[_Session] = []
    while True:
        while len(active) < shape.concurrent:
            active.append(_Session(rng.randint(*shape.turns)))
        session = active[rng.randrange(len(active))]
        if session.context == 0:
            if shape.first_from_profile:
                prompt = _length(rng, profile.generator.input, profile.input_tokens)
                prompt = max(prompt, shape.shared_prefix + 1)
            else:
                new = shape.turn_input
                prompt = shape.shared_prefix + _clipped(rng, *_draw(new))
            kept = blocks.shared(shape.shared_prefix // BLOCK_TOKENS)
        else:
            prompt = session.context + _clipped(rng, *_draw(shape.turn_input))
            kept = session.ids[: session.full_blocks]
        prompt = min(prompt, limit)
        output = _length(rng, profile.generator.output, profile.output_tokens)
        session.ids = kept + blocks.new(_blocks(prompt) - len(kept))
        session.full_blocks = prompt // BLOCK_TOKENS
        session.context = prompt + output
        session.turns_left -= 1
        if session.turns_left == 0 or session.context >= limit:
            active.remove(session)
        yield _Request(prompt, output, tuple(session.ids))


def _draw(draw: Draw) -> tuple[int, int, int, int]:
    return draw.mean, draw.stddev, draw.low, draw.high


def _arrivals(count: int, rate: float | None, seed: int) -> list[int]:
    """Poisson arrivals in whole ms, the first at 0; all at 0 without a rate."""
    if rate is None:
        return [0] * count
    rng = random.Random(f"{seed}:arrivals")  # its own stream: a rate changes times only
    at, out = 0.0, []
    for _ in range(count):
        out.append(round(at * 1000))
        at += rng.expovariate(rate)
    return out


def generate(
    workload: str,
    requests: int,
    seed: int = 0,
    rate: float | None = None,
    *,
    profiles: Mapping[str, WorkloadProfile],
) -> list[TrafficLine]:
    """`requests` lines of the named workload (a profile of catalog/workloads.yaml), the same
    for the same seed. Arrivals are Poisson at `rate` requests/s; `batch` sends everything at
    once, and so does any workload without a rate (closed-loop runs ignore timestamps)."""
    if requests < 1:
        raise UsageError(f"requests must be at least 1, got {requests}")
    if rate is not None and not (rate > 0 and math.isfinite(rate)):
        raise UsageError(f"rate must be a positive number of requests per second, got {rate}")
    profile = profile_for(workload, list(profiles.values()))
    if profile.throughput_only and rate is not None:
        raise UsageError(f"workload '{profile.id}' sends every request at once; drop --rate")
    rng = random.Random(f"{seed}:{profile.id}")
    shape = SESSIONS.get(profile.id)
    made = _multi_turn(profile, shape, rng) if shape else _single(profile, rng)
    stamps = _arrivals(requests, rate, seed)
    return [
        TrafficLine(
            timestamp=stamp,
            input_length=request.input_length,
            output_length=request.output_length,
            hash_ids=list(request.hash_ids),
        )
        for stamp, request in zip(stamps, made, strict=False)
    ]
