"""Pure logic: alarms as PromQL for a Prometheus server that scrapes the engines, and the
answers turned into `Reading`s.

The engines of a stage are picked by their `instance` label (host:port, Prometheus' default
for a scraped target). Engines of different kinds (vLLM and SGLang in one stage) name their
series differently: each kind is queried on its own; request and error counts add up, and the
larger value of the kinds counts (their histograms cannot be summed bucket by bucket).
Routers are asked apart for the metrics their series map (error_rate), and the worse value
counts (as `alarms.read`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from reconciler.engines.units import EngineSeries, Series
from reconciler.rollout.alarms import QUANTILES, Reading
from reconciler.rollout.series import at_routers, read_as
from reconciler.spec.policy import Alarm


@dataclass(frozen=True)
class AlarmQueries:
    requests: str
    counted: str | None  # a ratio's counter (error_rate: the failed requests)
    value: str | None  # None for a ratio (counted / requests), or a metric the engine lacks


@dataclass(frozen=True)
class Answer:
    """What one kind of engine answered."""

    requests: float
    counted: float | None
    value: float | None


def instance(url: str) -> str:
    """host:port of a metrics URL, as Prometheus labels the target."""
    found = re.match(r"^[a-z]+://([^/?#]+)", url)
    return found.group(1) if found else url


def selector(series: Series, instances: Sequence[str], suffix: str = "") -> str:
    labels = {**series.labels, "instance": "|".join(re.escape(i) for i in instances)}
    matchers = ",".join(f'{k}=~"{_quoted(v)}"' for k, v in sorted(labels.items()))
    return f"{series.name}{suffix}{{{matchers}}}"


def queries(alarm: Alarm, engine: EngineSeries, instances: Sequence[str]) -> AlarmQueries:
    w = _range(alarm.window)
    requests = _counted(selector(engine.requests, instances), w)
    if read_as(alarm.metric) == "ratio":
        counter = engine.metrics.get(alarm.metric)
        counted = _counted(selector(counter, instances), w) if counter is not None else None
        return AlarmQueries(requests, counted, None)
    return AlarmQueries(requests, None, _value(alarm, engine, instances, w))


def _counted(selected: str, w: str) -> str:
    """The counters' increase over the window, a series born inside it counted from zero.
    increase() alone starts a series at its first scraped value, so a label set created by
    its first request (an engine's first 5xx, say) loses whatever came before its first
    scrape: a burst of errors shorter than a scrape interval would read as none
    (prometheus/prometheus#1673)."""
    before = f"{selected} offset {w}"
    known = f"sum(increase({selected}[{w}]) and {before}) or vector(0)"
    born = f"sum({selected} unless {before}) or vector(0)"
    return f"({known}) + ({born})"


def _value(alarm: Alarm, engine: EngineSeries, instances: Sequence[str], w: str) -> str | None:
    stat, series = alarm.stat, engine.metrics.get(alarm.metric)
    if series is None:
        return None
    if read_as(alarm.metric) == "gauge":
        g = selector(series, instances)
        if stat == "value":
            return f"max({g})"
        if stat == "mean":
            return f"max(avg_over_time({g}[{w}]))"
        return f"max(quantile_over_time({QUANTILES[stat]}, {g}[{w}]))"
    if stat == "mean":
        total = f"sum(rate({selector(series, instances, '_sum')}[{w}]))"
        return f"{total} / sum(rate({selector(series, instances, '_count')}[{w}]))"
    buckets = f"sum by (le) (rate({selector(series, instances, '_bucket')}[{w}]))"
    return f"histogram_quantile({QUANTILES[stat]}, {buckets})"


def reading(
    name: str, alarm: Alarm, answers: Sequence[Answer], routers: Sequence[Answer] = ()
) -> Reading:
    """The alarm's reading from each engine kind's answers, and the routers' for a metric
    they map."""
    found = _reading(name, alarm, answers)
    if not at_routers(alarm.metric) or not routers:
        return found
    seen = _reading(name, alarm, routers)
    if seen.value is not None and (found.value is None or seen.value > found.value):
        return replace(seen, at="router")
    return found


def _reading(name: str, alarm: Alarm, answers: Sequence[Answer]) -> Reading:
    counted = sum(a.requests for a in answers)
    requests = round(counted)

    def done(value: float | None, note: str = "") -> Reading:
        firing = value is not None and value > alarm.max
        return Reading(name, alarm, value, requests, firing, alarm.window, (), note)

    if requests < alarm.min_requests:
        return done(None, f"{requests} requests < {alarm.min_requests}")
    if read_as(alarm.metric) == "ratio":
        having = [a for a in answers if a.counted is not None]
        asked = sum(a.requests for a in having)
        if not asked:
            return done(None, f"no {alarm.metric} counter in Prometheus")
        return done(sum(a.counted or 0.0 for a in having) / asked)
    values = [a.value for a in answers if a.value is not None]
    if not values:
        return done(None, f"no {alarm.metric} data in Prometheus")
    return done(max(values))


def _quoted(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def _range(seconds: float) -> str:
    return f"{int(seconds)}s" if float(seconds).is_integer() else f"{round(seconds * 1000)}ms"
