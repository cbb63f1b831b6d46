"""Models and file edges: traffic shapes in the Mooncake trace format — one JSON object a line,
`{"timestamp": ms, "input_length": n, "output_length": n, "hash_ids": [...]}`, where each hash
id names a 512-token prompt block (the last one may be partial) and equal ids at the same
position are equal prefixes. The canonical form and the digest are pure (a line is read by
engines/model/traffic.py, for the simulator too); only `read_trace` and `write_trace` touch
files."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path

from reconciler.bench.traffic_stats import TraceStats, trace_stats
from reconciler.bench.traffic_workloads import WORKLOADS, generate
from reconciler.engines.model.kvcache import BLOCK_TOKENS
from reconciler.engines.model.traffic import parse_traffic
from reconciler.spec.bounds import MAX_JSONL_BYTES
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
    "canonical_line",
    "generate",
    "read_trace",
    "trace_digest",
    "trace_stats",
    "write_trace",
]


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


def read_trace(path: Path) -> list[TraceLine]:
    """A trace file, validated (engines/model/traffic.py `parse_traffic`)."""
    # measured before it is read: a traffic file is JSON Lines (bounds.MAX_JSONL_BYTES)
    return parse_traffic(read_text(path, "traffic file", MAX_JSONL_BYTES), str(path))


def write_trace(lines: Iterable[TraceLine], path: Path) -> None:
    """The canonical JSONL, written whole to a temporary file and moved into place."""
    partial = path.with_name(path.name + ".partial")
    with partial.open("w", encoding="utf-8") as out:
        for line in lines:
            out.write(canonical_line(line) + "\n")
    partial.replace(path)
