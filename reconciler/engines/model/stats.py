"""Models and pure logic: a prediction's figures, computed as the metric dictionary
(docs/benchmarks.md) defines them (vLLM `bench serve`): TTFT, TPOT per request, ITL pooled
over every gap between streamed chunks, E2E, throughput over the measured window."""

from __future__ import annotations

import math
from collections.abc import Sequence

from reconciler.spec.base import Spec
from reconciler.spec.result import Metrics, Percentiles


class Pcts(Spec):
    p50: float
    p99: float

    def as_percentiles(self) -> Percentiles:
        """As a result file's percentiles (the simulator predicts p50 and p99 only)."""
        return Percentiles(p50=self.p50, p99=self.p99)


class Prediction(Spec):
    ttft_ms: Pcts
    tpot_ms: Pcts
    itl_ms: Pcts
    output_tok_s: float
    output_tok_s_per_gpu: float  # over every GPU of the deployment, prefill included
    total_tok_s_per_gpu: float  # input and output tokens
    e2e_ms: Pcts
    simulated: bool = True
    recipe: str
    hardware: str
    gpus: int
    concurrency: int | None = None
    rate: float | None = None
    requests: int  # measured: warm-up and rejected requests excluded
    warmup: int
    errors: int = 0  # requests rejected: prompt and output exceed what one replica holds
    duration_s: float  # the measured window, virtual time
    # Requests meeting every objective of the target given to `predict` (all answered ones
    # when none was given) per second of the window, as bench's goodput.
    goodput_rps: float | None = None
    good: int | None = None  # measured requests meeting every objective (all: no target)
    output_tokens: int | None = None  # output tokens of the measured requests
    # Open loop: measured sends per second (first to last send) and answers per second (first
    # to last answer), as bench/saturation.py takes them; None in closed loop.
    arrival_rps: float | None = None
    answer_rps: float | None = None

    def metrics(self, goodput: bool = False) -> Metrics:
        """The figures as a result's metrics. Goodput only when asked for: it counts against
        the target the prediction was given, which a result file does not record."""
        return Metrics(
            ttft_ms=self.ttft_ms.as_percentiles(),
            tpot_ms=self.tpot_ms.as_percentiles(),
            itl_ms=self.itl_ms.as_percentiles(),
            e2e_ms=self.e2e_ms.as_percentiles(),
            output_tok_s=self.output_tok_s,
            output_tok_s_per_gpu=self.output_tok_s_per_gpu,
            total_tok_s_per_gpu=self.total_tok_s_per_gpu,
            goodput_rps=self.goodput_rps if goodput else None,
            requests=self.requests,
            errors=self.errors,
        )


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default, as vLLM bench uses)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return _interpolate(ordered, [1] * len(ordered), q)


def weighted_percentile(pairs: Sequence[tuple[float, int]], q: float) -> float:
    """The same over values that repeat: (value, how many times)."""
    pairs = sorted(p for p in pairs if p[1] > 0)
    if not pairs:
        return math.nan
    return _interpolate([v for v, _ in pairs], [n for _, n in pairs], q)


def _interpolate(values: list[float], counts: list[int], q: float) -> float:
    rank = q / 100.0 * (sum(counts) - 1)
    low = math.floor(rank)
    below = _at(values, counts, low)
    if rank == low:
        return below
    return below + (_at(values, counts, low + 1) - below) * (rank - low)


def _at(values: list[float], counts: list[int], index: int) -> float:
    seen = 0
    for value, count in zip(values, counts, strict=True):
        seen += count
        if index < seen:
            return value
    return values[-1]


def pcts_ms(values: Sequence[float]) -> Pcts:
    return Pcts(
        p50=round(percentile(values, 50) * 1000, 3), p99=round(percentile(values, 99) * 1000, 3)
    )


def pcts_ms_weighted(pairs: Sequence[tuple[float, int]]) -> Pcts:
    return Pcts(
        p50=round(weighted_percentile(pairs, 50) * 1000, 3),
        p99=round(weighted_percentile(pairs, 99) * 1000, 3),
    )
