"""Pure logic: one load level's figures from its request records, exactly as the metric
dictionary of docs/benchmarks.md (vLLM `bench serve`) defines them.

- TTFT: first chunk carrying output − sent; E2E: last such chunk − sent.
- TPOT, per request: (E2E − TTFT) / (output tokens − 1), for requests of two tokens or more.
- ITL: every gap between consecutive output chunks, pooled over requests.
- Warm-up: the first `warmup` requests in send order are left out of every figure (default:
  one a client in closed loop, at most half the run; a tenth of the run in open loop — the
  rule `denv sim predict` uses).
- Throughput counts the output tokens that arrived inside the measured window — from the
  first measured send to the last measured answer's end — from every request, warm-up ones
  included, a request's tokens spread evenly over its chunks; divided by the window.
- Goodput: measured requests meeting every objective of the latency target (each judged on
  the request's own TTFT, TPOT, E2E, and its own ITL at the objective's statistic) divided by
  the window.
- Errors: measured requests that failed, by kind (`http_503`, `timeout`, …).
"""

from __future__ import annotations

import itertools
import statistics
from collections import Counter
from collections.abc import Sequence

from pydantic import NonNegativeFloat, NonNegativeInt

from reconciler.bench.records import RequestRecord
from reconciler.bench.saturation import Saturation, saturation
from reconciler.catalog.latency import LatencyTarget, Slo
from reconciler.engines.model.predict import default_warmup
from reconciler.engines.model.stats import percentile
from reconciler.spec.base import Spec
from reconciler.spec.result import Load, Metrics, Percentiles

QUANTILES = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0}


class LevelMetrics(Spec):
    """One load level of a sweep: the figures and how they were taken."""

    load: Load
    metrics: Metrics
    sent: NonNegativeInt  # every request sent, warm-up included
    warmup: NonNegativeInt  # requests left out of the figures
    window_s: NonNegativeFloat  # the measured window
    output_tokens: NonNegativeInt  # output tokens of the measured requests
    short_outputs: NonNegativeInt = 0  # measured answers shorter than asked (ignore_eos unheard)
    saturation: Saturation
    send_lag_ms: Percentiles | None = None  # open loop: how late the client sent (its health)


def percentiles_ms(seconds: Sequence[float]) -> Percentiles:
    """Mean and p50/p90/p95/p99 in milliseconds (linear interpolation, as numpy and vLLM)."""
    if not seconds:
        return Percentiles()
    values = {k: round(percentile(seconds, q) * 1000, 3) for k, q in QUANTILES.items()}
    return Percentiles(mean=round(statistics.fmean(seconds) * 1000, 3), **values)


def ttft(record: RequestRecord) -> float:
    return record.chunks_s[0] - record.sent_s


def e2e(record: RequestRecord) -> float:
    return record.chunks_s[-1] - record.sent_s


def tpot(record: RequestRecord) -> float | None:
    tokens = record.tokens
    if tokens < 2:
        return None
    return (record.chunks_s[-1] - record.chunks_s[0]) / (tokens - 1)


def gaps(record: RequestRecord) -> list[float]:
    return [b - a for a, b in itertools.pairwise(record.chunks_s)]


def measured_part(records: Sequence[RequestRecord], warmup: int) -> tuple[list[RequestRecord], int]:
    """The records past the first `warmup` sent (at least one is kept), and how many went."""
    by_send = sorted(records, key=lambda r: (r.sent_s, r.index))
    left_out = min(warmup, max(len(by_send) - 1, 0))
    return by_send[left_out:], left_out


def _request_figure(slo: Slo, record: RequestRecord) -> float | None:
    """One request's value for an objective, in ms."""
    if slo.metric == "ttft":
        value: float | None = ttft(record)
    elif slo.metric == "e2e":
        value = e2e(record)
    elif slo.metric == "tpot":
        value = tpot(record)
    else:
        own = gaps(record)
        if not own:
            return None
        value = statistics.fmean(own) if slo.stat == "mean" else percentile(own, _q(slo))
    return None if value is None else value * 1000


def _q(slo: Slo) -> float:
    return QUANTILES[slo.stat]


def meets(target: LatencyTarget, record: RequestRecord) -> bool:
    """Whether one answered request meets every objective (a figure it lacks, such as the
    TPOT of a one-token answer, does not count against it)."""
    for slo in target.slos:
        value = _request_figure(slo, record)
        if value is not None and value > slo.max_ms:
            return False
    return True


def _window_tokens(records: Sequence[RequestRecord], start: float, end: float) -> float:
    counted = 0.0
    for record in records:
        if record.ok and record.chunks_s:
            share = record.tokens / len(record.chunks_s)
            counted += share * sum(1 for at in record.chunks_s if start < at <= end)
    return counted


def _prompt_tokens(records: Sequence[RequestRecord], start: float, end: float) -> int:
    """Prompt tokens of the requests whose first token came inside the window."""
    return sum(
        r.prompt_tokens if r.prompt_tokens is not None else r.input_length
        for r in records
        if r.ok and r.chunks_s and start < r.chunks_s[0] <= end
    )


def level_metrics(
    records: Sequence[RequestRecord],
    load: Load,
    *,
    gpus: int,
    target: LatencyTarget | None = None,
    warmup: int | None = None,
) -> LevelMetrics:
    """The level's figures; `gpus` is every GPU of the deployment, prefill included."""
    if warmup is None:
        warmup = default_warmup(len(records), load.concurrency)
    measured, left_out = measured_part(records, warmup)
    answered = [r for r in measured if r.ok]
    start = min((r.sent_s for r in measured), default=0.0)
    end = max((r.done_s for r in measured), default=0.0)
    window = max(end - start, 1e-9)
    output = _window_tokens(records, start, end)
    prompt = _prompt_tokens(records, start, end)
    good = sum(1 for r in answered if meets(target, r)) if target else None
    failed = Counter(r.error_label for r in measured if not r.ok)
    itl = [gap for r in answered for gap in gaps(r)]
    tpots = [t for r in answered if (t := tpot(r)) is not None]
    metrics = Metrics(
        ttft_ms=percentiles_ms([ttft(r) for r in answered]),
        tpot_ms=percentiles_ms(tpots),
        itl_ms=percentiles_ms(itl),
        e2e_ms=percentiles_ms([e2e(r) for r in answered]),
        output_tok_s=round(output / window, 3) if measured else None,
        output_tok_s_per_gpu=round(output / window / gpus, 3) if measured else None,
        total_tok_s_per_gpu=round((output + prompt) / window / gpus, 3) if measured else None,
        goodput_rps=round(good / window, 3) if good is not None and measured else None,
        requests=len(answered),
        errors=sum(failed.values()),
        errors_by_kind={str(k): n for k, n in sorted(failed.items())},
    )
    lag = [r.sent_s - r.scheduled_s for r in measured if r.scheduled_s is not None]
    return LevelMetrics(
        load=load,
        metrics=metrics,
        sent=len(records),
        warmup=left_out,
        window_s=round(window, 6),
        output_tokens=sum(r.tokens for r in answered),
        short_outputs=sum(1 for r in answered if r.tokens < r.output_length),
        saturation=saturation(measured),
        send_lag_ms=percentiles_ms([max(x, 0.0) for x in lag]) if lag else None,
    )
