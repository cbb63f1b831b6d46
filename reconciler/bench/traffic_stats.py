"""Models and pure logic: what a traffic shape looks like — its rate, how bursty its arrivals
are, its length distributions and how much of its prompts repeat earlier prefixes."""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Sequence

from reconciler.engines.model.stats import percentile
from reconciler.spec.base import Spec
from reconciler.spec.result import TrafficLine


class Lengths(Spec):
    """Token counts over the trace's requests."""

    mean: float
    p50: float
    p90: float
    p99: float
    min: int
    max: int


class TraceStats(Spec):
    requests: int
    duration_s: float  # first to last arrival
    rate_rps: float | None  # arrivals per second over that span; None when it is zero
    burstiness: float | None  # CV of the gaps between arrivals: 1 Poisson, 0 even, >1 bursty
    input: Lengths
    output: Lengths
    blocks: int  # hash ids over every request
    unique_blocks: int
    prefix_reuse: float  # fraction of blocks an earlier request already sent


def _lengths(values: Sequence[int]) -> Lengths:
    floats = [float(v) for v in values]
    return Lengths(
        mean=statistics.fmean(floats),
        p50=percentile(floats, 50),
        p90=percentile(floats, 90),
        p99=percentile(floats, 99),
        min=min(values),
        max=max(values),
    )


def _burstiness(gaps: Sequence[float]) -> float | None:
    if len(gaps) < 2:
        return None
    mean = statistics.fmean(gaps)
    if mean == 0:
        return None
    return statistics.pstdev(gaps) / mean


def trace_stats(lines: Sequence[TrafficLine]) -> TraceStats:
    """Figures of a non-empty trace; lines are taken in timestamp order."""
    if not lines:
        raise ValueError("a trace needs at least one request")
    ordered = sorted(lines, key=lambda line: line.timestamp)
    stamps = [line.timestamp for line in ordered]
    gaps = [(b - a) / 1000.0 for a, b in itertools.pairwise(stamps)]
    span = (stamps[-1] - stamps[0]) / 1000.0
    seen: set[int] = set()
    reused = total = 0
    for line in ordered:
        for block in line.hash_ids:
            total += 1
            if block in seen:
                reused += 1
            seen.add(block)
    return TraceStats(
        requests=len(ordered),
        duration_s=span,
        rate_rps=(len(ordered) - 1) / span if span > 0 else None,
        burstiness=_burstiness(gaps),
        input=_lengths([line.input_length for line in ordered]),
        output=_lengths([line.output_length for line in ordered]),
        blocks=total,
        unique_blocks=len(seen),
        prefix_reuse=reused / total if total else 0.0,
    )
