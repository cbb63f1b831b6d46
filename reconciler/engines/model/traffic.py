"""Pure logic: the requests a prediction sends — fixed lengths, a workload profile's
distributions, or a Mooncake traffic file — each drawn with a fixed seed, so a prediction is
the same on every run; and the one reading of a traffic file's text (`parse_traffic`), for
`denv bench` and `denv traffic` too."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import ValidationError

from reconciler.engines.model.kvcache import BLOCK_TOKENS
from reconciler.errors import Problem, SpecError
from reconciler.spec.jsonio import read_line
from reconciler.spec.problems import from_validation
from reconciler.spec.result import TrafficLine
from reconciler.spec.workload import TokenRange, WorkloadProfile

SEED = 20261130
_UNIQUE_BLOCKS = 1 << 40  # hash ids of blocks no other request shares start here


@dataclass(frozen=True)
class Request:
    prompt: int
    output: int
    blocks: tuple[int, ...]  # hashes of the prompt's full 512-token blocks
    at_s: float | None = None  # send time (open loop, traces); None: when a client is free


def fixed(
    isl: int, osl: int, count: int, range_ratio: float = 1.0, seed: int = SEED
) -> list[Request]:
    """Lengths drawn uniformly from [ratio × L, L] (vLLM bench's random dataset,
    --random-range-ratio); random token prompts share no prefix."""
    rng = random.Random(seed)
    blocks = _Unique()
    out = []
    for _ in range(count):
        prompt = rng.randint(max(int(isl * range_ratio), 1), isl)
        output = rng.randint(max(int(osl * range_ratio), 1), osl)
        out.append(Request(prompt, output, blocks.take(prompt // BLOCK_TOKENS)))
    return out


def workload(profile: WorkloadProfile, count: int, seed: int = SEED) -> list[Request]:
    """The profile's generator: normal lengths clipped to its ranges. `prefix_reuse` of each
    prompt (whole blocks) is one prefix all requests share, like a system prompt and tool
    definitions; the rest of the prompt is its own."""
    rng = random.Random(seed)
    gen = profile.generator
    blocks = _Unique()
    out = []
    for _ in range(count):
        prompt = _clipped(rng, gen.input.mean, gen.input.stddev, profile.input_tokens)
        output = _clipped(rng, gen.output.mean, gen.output.stddev, profile.output_tokens)
        full = prompt // BLOCK_TOKENS
        shared = min(round(prompt * profile.prefix_reuse / BLOCK_TOKENS), full)
        out.append(Request(prompt, output, tuple(range(shared)) + blocks.take(full - shared)))
    return out


def traced(lines: list[TrafficLine]) -> list[Request]:
    """A Mooncake trace: its timestamps (ms) become send times; hash_ids name 512-token
    blocks, the last possibly partial, so only the full ones are kept."""
    return [
        Request(
            line.input_length,
            line.output_length,
            tuple(line.hash_ids[: line.input_length // BLOCK_TOKENS]),
            line.timestamp / 1000.0,
        )
        for line in lines
    ]


def poisson(requests: list[Request], rate: float, seed: int = SEED) -> list[Request]:
    """Open loop: exponential gaps with mean 1 / rate seconds, the first request at 0."""
    rng = random.Random(seed + 1)
    at, out = 0.0, []
    for request in requests:
        out.append(Request(request.prompt, request.output, request.blocks, at))
        at += rng.expovariate(rate)
    return out


def blocks_for(input_length: int) -> int:
    """How many hash ids a prompt of this many tokens has: one per 512-token block, the last
    one possibly partial."""
    return math.ceil(input_length / BLOCK_TOKENS)


def _column(raw: str, key: str | int | None) -> int:
    at = raw.find(f'"{key}"') if isinstance(key, str) else -1
    return at + 1 if at >= 0 else 1


def _line_problems(path: str, number: int, raw: str) -> tuple[TrafficLine | None, list[Problem]]:
    data, problem = read_line(path, number, raw)
    if problem is not None:
        return None, [problem]
    if not isinstance(data, dict):
        return None, [Problem(path, number, 1, "a trace line must be a JSON object")]

    def locate(where: Sequence[str | int]) -> tuple[int, int]:
        return number, _column(raw, where[0] if where else None)

    try:
        line = TrafficLine.model_validate(data)
    except ValidationError as exc:
        return None, from_validation(path, data, exc, locate)
    expected = blocks_for(line.input_length)
    if len(line.hash_ids) != expected:
        message = (
            f"hash_ids: {len(line.hash_ids)} block ids for input_length {line.input_length}; "
            f"expected {expected} (one per {BLOCK_TOKENS}-token block, the last may be partial)"
        )
        return None, [Problem(path, number, _column(raw, "hash_ids"), message)]
    return line, []


def parse_traffic(text: str, path: str) -> list[TrafficLine]:
    """Every line of a Mooncake trace, sorted by timestamp (stable: a recorder writes lines as
    requests finish), or SpecError naming file:line:col and the field of each bad line — the
    one reading of a traffic file, for `denv bench`, `denv traffic` and `denv sim predict`."""
    lines: list[TrafficLine] = []
    problems: list[Problem] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        line, found = _line_problems(path, number, raw)
        problems += found
        if line is not None:
            lines.append(line)
    if problems:
        raise SpecError(problems)
    if not lines:
        raise SpecError([Problem(path, 1, 1, "no requests in the traffic file")])
    return sorted(lines, key=lambda line: line.timestamp)


def _clipped(rng: random.Random, mean: int, stddev: int, bounds: TokenRange) -> int:
    return int(min(max(round(rng.gauss(mean, stddev)), bounds.min), bounds.max))


class _Unique:
    def __init__(self) -> None:
        self._next = _UNIQUE_BLOCKS

    def take(self, count: int) -> tuple[int, ...]:
        start, self._next = self._next, self._next + count
        return tuple(range(start, start + count))
