"""Models and file edges: traffic shapes in the Mooncake trace format — one JSON object a line,
`{"timestamp": ms, "input_length": n, "output_length": n, "hash_ids": [...]}`, where each hash
id names a 512-token prompt block (the last one may be partial) and equal ids at the same
position are equal prefixes. Parsing, the canonical form and the digest are pure; only
`read_trace` and `write_trace` touch files."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path

from pydantic import ValidationError

from reconciler.bench.traffic_stats import TraceStats, trace_stats
from reconciler.bench.traffic_workloads import WORKLOADS, generate
from reconciler.engines.model.kvcache import BLOCK_TOKENS
from reconciler.errors import Problem, SpecError
from reconciler.spec.bounds import MAX_JSONL_BYTES
from reconciler.spec.jsonio import read_line
from reconciler.spec.problems import from_validation
from reconciler.spec.reading import read_text
from reconciler.spec.result import TrafficLine

# One concept, one place: a trace line is the spec's TrafficLine (what `denv validate` and the
# simulator read too); bench adds the block-count rule below.
TraceLine = TrafficLine

__all__ = [
    "BLOCK_TOKENS",
    "WORKLOADS",
    "TraceLine",
    "TraceStats",
    "blocks_for",
    "canonical_line",
    "generate",
    "parse_trace",
    "read_trace",
    "trace_digest",
    "trace_stats",
    "write_trace",
]


def blocks_for(input_length: int) -> int:
    """How many hash ids a prompt of this many tokens has: one per 512-token block, the last
    one possibly partial."""
    return math.ceil(input_length / BLOCK_TOKENS)


def canonical_line(line: TraceLine) -> str:
    """The line as Mooncake writes it: fixed key order, no spaces, whole-ms timestamps as
    integers."""
    stamp: float | int = line.timestamp
    if float(stamp).is_integer():
        stamp = int(stamp)
    body = {
        "timestamp": stamp,
        "input_length": line.input_length,
        "output_length": line.output_length,
        "hash_ids": list(line.hash_ids),
    }
    return json.dumps(body, separators=(",", ":"))


def trace_digest(lines: Iterable[TraceLine]) -> str:
    """sha256 (hex) of the canonical JSONL: the same requests give the same digest however
    the file was spaced."""
    digest = hashlib.sha256()
    for line in lines:
        digest.update(canonical_line(line).encode())
        digest.update(b"\n")
    return digest.hexdigest()


def _column(raw: str, key: str | int | None) -> int:
    at = raw.find(f'"{key}"') if isinstance(key, str) else -1
    return at + 1 if at >= 0 else 1


def _line_problems(path: str, number: int, raw: str) -> tuple[TraceLine | None, list[Problem]]:
    data, problem = read_line(path, number, raw)
    if problem is not None:
        return None, [problem]
    if not isinstance(data, dict):
        return None, [Problem(path, number, 1, "a trace line must be a JSON object")]

    def locate(where: Sequence[str | int]) -> tuple[int, int]:
        return number, _column(raw, where[0] if where else None)

    try:
        line = TraceLine.model_validate(data)
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


def parse_trace(text: str, path: str) -> list[TraceLine]:
    """Every line of a trace, sorted by timestamp (stable: a recorder writes lines as requests
    finish), or SpecError naming file:line:col and the field of each bad line."""
    lines: list[TraceLine] = []
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


def read_trace(path: Path) -> list[TraceLine]:
    """A trace file, validated (see `parse_trace`)."""
    # measured before it is read: a traffic file is JSON Lines (bounds.MAX_JSONL_BYTES)
    return parse_trace(read_text(path, "traffic file", MAX_JSONL_BYTES), str(path))


def write_trace(lines: Iterable[TraceLine], path: Path) -> None:
    """The canonical JSONL, written whole to a temporary file and moved into place."""
    partial = path.with_name(path.name + ".partial")
    with partial.open("w", encoding="utf-8") as out:
        for line in lines:
            out.write(canonical_line(line) + "\n")
    partial.replace(path)
