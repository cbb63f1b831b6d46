"""Pure logic: which Prometheus series each engine and router exports for each alarm metric
(one table), and one scrape of its /metrics text turned into engine-neutral values.

Names are read from the engines (/work/shared/reference/engines.md; vLLM's
`vllm/v1/metrics/loggers.py` and API server, SGLang's `srt/metrics/collector.py`). Every
series of a name that matches the labels given is summed (vLLM labels each engine core,
SGLang each rank), except gauges, which keep the largest.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

HISTOGRAM_METRICS = ("ttft", "tpot", "itl", "e2e", "queue_time")
GAUGE_METRICS = ("queue", "kv_usage")
COUNTERS = ("requests", "errors")
GENERATION_ROUTES = "/v1/(chat/)?completions"


@dataclass(frozen=True)
class Series:
    """A sample name (a histogram's base name) and label values as regular expressions that
    must match whole, as PromQL's `=~` does; series without a listed label do not match."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(re.fullmatch(rx, labels.get(k, "")) for k, rx in self.labels.items())


@dataclass(frozen=True)
class EngineSeries:
    """Where an engine keeps each alarm metric; a metric it lacks is absent."""

    histograms: Mapping[str, Series]
    gauges: Mapping[str, Series]
    requests: Series  # a counter of requests answered, failures included
    errors: Series  # a counter of the failed ones


# vLLM's API server counts answers by route and status class (prometheus-fastapi-
# instrumentator): what a client sees, 5xx included, which `request_success_total` is not.
VLLM = EngineSeries(
    histograms={
        "ttft": Series("vllm:time_to_first_token_seconds"),
        "tpot": Series("vllm:request_time_per_output_token_seconds"),
        "itl": Series("vllm:inter_token_latency_seconds"),
        "e2e": Series("vllm:e2e_request_latency_seconds"),
        "queue_time": Series("vllm:request_queue_time_seconds"),
    },
    gauges={
        "queue": Series("vllm:num_requests_waiting"),
        "kv_usage": Series("vllm:kv_cache_usage_perc"),
    },
    requests=Series("http_requests_total", {"handler": GENERATION_ROUTES}),
    errors=Series("http_requests_total", {"handler": GENERATION_ROUTES, "status": "5xx"}),
)
# SGLang has no per-request TPOT histogram, and counts finished and aborted requests apart.
SGLANG = EngineSeries(
    histograms={
        "ttft": Series("sglang:time_to_first_token_seconds"),
        "itl": Series("sglang:inter_token_latency_seconds"),
        "e2e": Series("sglang:e2e_request_latency_seconds"),
        "queue_time": Series("sglang:queue_time_seconds"),
    },
    gauges={
        "queue": Series("sglang:num_queue_reqs"),
        "kv_usage": Series("sglang:token_usage"),
    },
    requests=Series("sglang:num_requests_total"),
    errors=Series("sglang:num_aborted_requests_total"),
)
ENGINES: Mapping[str, EngineSeries] = {"vllm": VLLM, "sglang": SGLANG, "sim": VLLM}
# sglang-router (0.3.2, names `smg_`) counts every answer it gives by status: its own 5xx (no
# worker left, upstream failed after retries) are what clients see and no engine counts. Its
# probes' answers (/readiness, /health) are counted too. It exports no engine histogram, so
# it is judged on error_rate only. vllm-router's names are not known here: it is not read.
SGLANG_ROUTER = EngineSeries(
    histograms={},
    gauges={},
    requests=Series("smg_http_responses_total"),
    errors=Series("smg_http_responses_total", {"status_code": "5.."}),
)
ROUTERS: Mapping[str, EngineSeries] = {"sglang-router": SGLANG_ROUTER}
SERIES: Mapping[str, EngineSeries] = {**ENGINES, **ROUTERS}  # every kind a stage scrapes


@dataclass(frozen=True)
class Histogram:
    """Cumulative bucket counts; `bounds` are the finite upper bounds, `counts` has one more
    entry, the +Inf bucket (every observation)."""

    bounds: tuple[float, ...]
    counts: tuple[float, ...]
    total: float  # the sum of the observed values

    @property
    def count(self) -> float:
        return self.counts[-1]


@dataclass(frozen=True)
class Scrape:
    """One engine's values at one moment: cumulative histograms and counters, gauges."""

    histograms: Mapping[str, Histogram]
    counters: Mapping[str, float]
    gauges: Mapping[str, float]
    created: float | None  # the earliest `_created` of its histograms: a new value = a restart


class ParseError(ValueError):
    """The text is not Prometheus exposition format."""


def parse(engine: EngineSeries, text: str, wanted: frozenset[str]) -> Scrape:
    """The `wanted` alarm metrics (and both counters) out of /metrics text."""
    buckets: dict[str, dict[float, float]] = {m: {} for m in engine.histograms if m in wanted}
    sums: dict[str, float] = {}
    created: list[float] = []
    counters = dict.fromkeys(COUNTERS, 0.0)
    gauges: dict[str, float] = {}
    by_name = _index(engine, wanted)
    try:
        samples = [s for family in text_string_to_metric_families(text) for s in family.samples]
    except (ValueError, IndexError, KeyError) as exc:
        raise ParseError(f"not Prometheus text: {exc}") from exc
    for sample in samples:
        for kind, metric, series in by_name.get(sample.name, ()):
            if not series.matches(sample.labels):
                continue
            value = float(sample.value)
            if kind == "bucket":
                le = float(sample.labels.get("le", "nan"))
                if not math.isnan(le):
                    buckets[metric][le] = buckets[metric].get(le, 0.0) + value
            elif kind == "sum":
                sums[metric] = sums.get(metric, 0.0) + value
            elif kind == "created":
                created.append(value)
            elif kind == "counter":
                counters[metric] += value
            else:
                gauges[metric] = max(gauges.get(metric, value), value)
    histograms = {m: _histogram(b, sums.get(m, 0.0)) for m, b in buckets.items() if b}
    return Scrape(histograms, counters, gauges, min(created) if created else None)


def _index(
    engine: EngineSeries, wanted: frozenset[str]
) -> dict[str, list[tuple[str, str, Series]]]:
    """Sample name -> (what it is, alarm metric, series) for everything to read."""
    index: dict[str, list[tuple[str, str, Series]]] = {}

    def add(name: str, kind: str, metric: str, series: Series) -> None:
        index.setdefault(name, []).append((kind, metric, series))

    for metric, series in engine.histograms.items():
        if metric in wanted:
            for kind in ("bucket", "sum", "created"):
                add(f"{series.name}_{kind}", kind, metric, series)
    for metric, series in engine.gauges.items():
        if metric in wanted:
            add(series.name, "gauge", metric, series)
    add(engine.requests.name, "counter", "requests", engine.requests)
    add(engine.errors.name, "counter", "errors", engine.errors)
    return index


def _histogram(buckets: Mapping[float, float], total: float) -> Histogram:
    bounds = sorted(b for b in buckets if not math.isinf(b))
    counts = [buckets[b] for b in bounds]
    counts.append(buckets.get(math.inf, counts[-1] if counts else 0.0))
    return Histogram(tuple(bounds), tuple(counts), total)
