"""Pure logic: which Prometheus series each engine and router exports for each alarm metric
(an engine's from its card, `ALARM_SERIES`; the routers' here), and one scrape of its
/metrics text turned into engine-neutral values: how each metric is read (histogram, gauge,
or a counter over requests) is its row's in reconciler/spec/alarm_metrics.py.

Every series of a name that matches the labels given is summed (vLLM labels each engine
core, SGLang each rank), except gauges, which keep the largest.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from reconciler.engines.cards import card
from reconciler.engines.units import EngineSeries, Series
from reconciler.spec.alarm_metrics import ALARM_METRICS, Read
from reconciler.spec.engines import engine_names

REQUESTS = "requests"  # the counter every alarm counts its requests on


# sglang-router (0.3.2, names `smg_`) counts every answer it gives by status: its own 5xx (no
# worker left, upstream failed after retries) are what clients see and no engine counts. Its
# probes' answers (/readiness, /health) are counted too. It exports no engine histogram, so
# it is judged on error_rate only. vllm-router's names are not known here: it is not read.
SGLANG_ROUTER = EngineSeries(
    requests=Series("smg_http_responses_total"),
    metrics={"error_rate": Series("smg_http_responses_total", {"status_code": "5.."})},
)
ROUTERS: Mapping[str, EngineSeries] = {"sglang-router": SGLANG_ROUTER}


def read_as(metric: str) -> Read | None:
    """How an alarm metric is read (its table row's); None for a name the table lacks."""
    row = ALARM_METRICS.get(metric)
    return row.read if row is not None else None


def at_routers(metric: str) -> bool:
    """Whether routers are read for the metric too (their series map it): what they
    answered clients, judged apart from the engines."""
    return any(metric in router.metrics for router in ROUTERS.values())


def series_for(kind: str) -> EngineSeries | None:
    """Where a unit of `kind` (a router, or a registered engine: its card's) keeps the alarm
    metrics; None for a kind whose metrics are not read."""
    if kind in ROUTERS:
        return ROUTERS[kind]
    return card(kind).ALARM_SERIES if kind in engine_names() else None


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
    """The `wanted` alarm metrics (and the requests counter) out of /metrics text; a ratio's
    counter is kept under its metric's name."""
    by_name = _index(engine, wanted)
    read = [m for m in engine.metrics if m in wanted and read_as(m) == "histogram"]
    buckets: dict[str, dict[float, float]] = {m: {} for m in read}
    sums: dict[str, float] = {}
    created: list[float] = []
    counters = {m: 0.0 for m, _ in _counters(engine, wanted)}
    gauges: dict[str, float] = {}
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

    for metric, series in engine.metrics.items():
        read = read_as(metric)
        if metric in wanted and read == "histogram":
            for kind in ("bucket", "sum", "created"):
                add(f"{series.name}_{kind}", kind, metric, series)
        elif metric in wanted and read == "gauge":
            add(series.name, "gauge", metric, series)
    for metric, series in _counters(engine, wanted):
        add(series.name, "counter", metric, series)
    return index


def _counters(engine: EngineSeries, wanted: frozenset[str]) -> list[tuple[str, Series]]:
    """The requests counter, and the counter of each wanted ratio the engine maps."""
    ratios = [(m, s) for m, s in engine.metrics.items() if m in wanted and read_as(m) == "ratio"]
    return [(REQUESTS, engine.requests), *ratios]


def _histogram(buckets: Mapping[float, float], total: float) -> Histogram:
    bounds = sorted(b for b in buckets if not math.isinf(b))
    counts = [buckets[b] for b in bounds]
    counts.append(buckets.get(math.inf, counts[-1] if counts else 0.0))
    return Histogram(tuple(bounds), tuple(counts), total)
