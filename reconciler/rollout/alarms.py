"""Pure logic: alarms judged over a window of the engines' cumulative samples, each metric
as its row in reconciler/spec/alarm_metrics.py says it is read.

A window of W seconds ending now compares each engine's newest point with its newest point at
or before now - W (or its first, when the history is shorter: `Reading.covered` says how long
the window really is). Latency percentiles come from the difference of the histograms, summed
over engines, interpolated linearly inside the bucket as Prometheus' `histogram_quantile`
does; `mean` is the difference of the sums over that of the counts. A ratio (`error_rate`)
is its counter's increase over that of the answered requests. Gauges (`waiting`,
`kv_usage`) take the engines' points inside the window: `value` is the newest, `mean` their
average, `p..` their percentile; the busiest engine counts. An alarm with fewer than
`min_requests` requests in its window is not judged, and an engine that did not answer adds
nothing (it is named in `missing`), so a lost scrape never fires an alarm.

A metric the routers' series map (`error_rate`) is also read at the stage's routers, from
what they answered clients: a router that refuses clients while its engines see nothing wrong
(no worker left, retries exhausted) fires it. The worse of the two values counts, each judged
on its own requests; other metrics are the engines' alone (a router's counts would count each
request twice).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from reconciler.rollout.samples import Point, Track, minus, since_start, window
from reconciler.rollout.series import REQUESTS, ROUTERS, Histogram, at_routers, read_as
from reconciler.spec.alarm_metrics import alarm_metric
from reconciler.spec.policy import Alarm

QUANTILES = {"p50": 0.50, "p90": 0.90, "p95": 0.95, "p99": 0.99}


@dataclass(frozen=True)
class Reading:
    """One alarm's value over its window, and whether it fires."""

    name: str  # the alarm's name in policies/alarms.yaml
    alarm: Alarm
    value: float | None  # None: not judged (fewer than min_requests, no data); see `note`
    requests: int  # requests answered in the window, over every engine
    firing: bool  # value is not None and value > alarm.max
    covered: float = 0.0  # seconds the window spans; less than alarm.window: short history
    missing: tuple[str, ...] = ()  # engines (metrics URLs) whose latest scrape failed
    note: str = ""  # why value is None
    over: str = ""  # what the window was, when not the alarm's own (e.g. "4s bake")
    at: str = ""  # "router" when the value is what the routers answered clients

    def describe(self) -> str:
        """e.g. 'ttft p99 2.31 s > 1.5 s (812 requests, 5m)'."""
        a = self.alarm
        what = a.metric if a.stat == "value" else f"{a.metric} {a.stat}"
        span = duration_text(a.window)
        if self.covered + 1e-9 < a.window:
            span = f"{duration_text(self.covered)} of {span}"
        span = self.over or span
        tail = f" (not answering: {', '.join(self.missing)})" if self.missing else ""
        if self.value is None:
            return f"{what}: not judged, {self.note} ({span}){tail}"
        sign = ">" if self.firing else "≤"
        value, limit = value_text(a.metric, self.value), value_text(a.metric, a.max)
        where = f" at the {self.at}" if self.at else ""
        return f"{what} {value} {sign} {limit}{where} ({self.requests} requests, {span}){tail}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "metric": self.alarm.metric,
            "stat": self.alarm.stat,
            "max": self.alarm.max,
            "window": self.alarm.window,
            "value": self.value,
            "requests": self.requests,
            "firing": self.firing,
            "covered": self.covered,
            "missing": list(self.missing),
            "note": self.note,
            "at": self.at,
            "text": self.describe(),
        }


def evaluate(alarms: Mapping[str, Alarm], tracks: Mapping[str, Track], now: float) -> list[Reading]:
    """Every alarm's reading at `now` (Unix seconds) from the engines' tracks, by URL."""
    return [read(name, alarm, tracks, now) for name, alarm in alarms.items()]


def over_bake(
    alarms: Mapping[str, Alarm], tracks: Mapping[str, Track], since: float, now: float
) -> list[Reading]:
    """Every alarm read over the whole bake (`since` to `now`) rather than its own window:
    the evidence of a bake that turned green. Requests and histograms come from each
    engine's first point of the bake and its newest; gauges from the points kept."""
    whole = {url: since_start(t) for url, t in tracks.items()}
    found = []
    for name, alarm in alarms.items():
        longer = alarm.model_copy(update={"window": max(now - since, alarm.window)})
        reading = read(name, longer, whole, now)
        found.append(replace(reading, over=f"{duration_text(now - since)} bake"))
    return found


def read(name: str, alarm: Alarm, tracks: Mapping[str, Track], now: float) -> Reading:
    """The alarm over the engines' tracks, and the routers' as well for a metric they map."""
    routers = {url: t for url, t in tracks.items() if t.engine in ROUTERS}
    engines = {url: t for url, t in tracks.items() if url not in routers}
    found = _read(name, alarm, engines, now)
    if not at_routers(alarm.metric) or not routers:
        return found
    seen = _read(name, alarm, routers, now)
    missing = tuple(sorted({*found.missing, *seen.missing}))
    if seen.value is not None and (found.value is None or seen.value > found.value):
        return replace(seen, missing=missing, at="router")
    return replace(found, missing=missing)


def _read(name: str, alarm: Alarm, tracks: Mapping[str, Track], now: float) -> Reading:
    missing = tuple(sorted(url for url, t in tracks.items() if t.error is not None))
    spans = {url: s for url, t in tracks.items() if (s := window(t, now, alarm.window))}
    counted = sum(_delta(s, REQUESTS) for s in spans.values())
    requests = round(counted)
    covered = min((new.at - old.at for old, new in spans.values()), default=0.0)

    def reading(value: float | None, note: str = "") -> Reading:
        firing = value is not None and value > alarm.max
        return Reading(name, alarm, value, requests, firing, covered, missing, note)

    if not spans:
        return reading(None, "no engine answered" if missing else "no samples in the window yet")
    if requests < alarm.min_requests:
        return reading(None, f"{requests} requests < {alarm.min_requests}")
    metric, read = alarm.metric, read_as(alarm.metric)
    engines = "/".join(sorted({tracks[url].engine for url in spans}))
    if read == "ratio":
        having = [s for s in spans.values() if metric in s[1].counters]
        if not having:
            return reading(None, f"{engines} export no {metric} counter")
        asked = sum(_delta(s, REQUESTS) for s in having)
        value = sum(_delta(s, metric) for s in having) / asked if asked else None
        return reading(value, "" if value is not None else f"no requests at {engines}")
    if read == "gauge":
        value = _gauge(alarm, [tracks[url] for url in spans], now)
        return reading(value, "" if value is not None else f"no {metric} gauge")
    if read == "histogram":
        deltas = [
            minus(new.histograms[metric], old.histograms[metric])
            for old, new in spans.values()
            if metric in new.histograms and metric in old.histograms
        ]
        if not deltas:
            return reading(None, f"{engines} export no {metric} histogram")
        merged = merge(deltas)
        if merged.count <= 0:
            return reading(None, f"no {metric} observations")
        if alarm.stat == "mean":
            return reading(merged.total / merged.count)
        return reading(quantile(QUANTILES[alarm.stat], merged))
    return reading(None, f"unknown metric {metric}")


def _delta(span: tuple[Point, Point], counter: str) -> float:
    old, new = span
    return max(new.counters.get(counter, 0.0) - old.counters.get(counter, 0.0), 0.0)


def _gauge(alarm: Alarm, tracks: list[Track], now: float) -> float | None:
    """The busiest engine's stat over its gauge points inside the window."""
    metric, start, per_engine = alarm.metric, now - alarm.window, []
    for track in tracks:
        values = [p.gauges[metric] for p in track.points if p.at > start and metric in p.gauges]
        if not values:
            continue
        if alarm.stat == "value":
            per_engine.append(values[-1])
        elif alarm.stat == "mean":
            per_engine.append(sum(values) / len(values))
        else:
            per_engine.append(percentile(QUANTILES[alarm.stat], values))
    return max(per_engine, default=None)


def quantile(q: float, h: Histogram) -> float:
    """Prometheus' histogram_quantile: the bucket holding rank q*count, interpolated linearly
    from its lower bound (0 for the first bucket); past the last finite bound, that bound."""
    rank = q * h.count
    index = next(i for i, c in enumerate(h.counts) if c >= rank)
    if index == len(h.bounds):
        return h.bounds[-1] if h.bounds else math.nan
    upper = h.bounds[index]
    if index == 0 and upper <= 0:
        return upper
    lower = h.bounds[index - 1] if index > 0 else 0.0
    below = h.counts[index - 1] if index > 0 else 0.0
    inside = h.counts[index] - below
    return lower + (upper - lower) * (rank - below) / inside if inside > 0 else upper


def merge(histograms: list[Histogram]) -> Histogram:
    """The sum of histograms; different bucket bounds (two engines) are merged on the union
    of bounds, each count placed at its own upper bound (never lower than observed)."""
    first = histograms[0]
    if all(h.bounds == first.bounds for h in histograms):
        counts = tuple(map(math.fsum, zip(*(h.counts for h in histograms), strict=True)))
        return Histogram(first.bounds, counts, math.fsum(h.total for h in histograms))
    union = tuple(sorted({b for h in histograms for b in h.bounds}))
    summed = [0.0] * (len(union) + 1)
    for h in histograms:
        for i, bound in enumerate(union):
            own = [c for b, c in zip(h.bounds, h.counts, strict=False) if b <= bound]
            summed[i] += own[-1] if own else 0.0
        summed[-1] += h.count
    return Histogram(union, tuple(summed), math.fsum(h.total for h in histograms))


def percentile(q: float, values: list[float]) -> float:
    """Linear interpolation between the closest ranks (numpy's default)."""
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def value_text(metric: str, value: float, digits: str = ".3g") -> str:
    """A value (or limit) of the metric in its unit: '2.31 s', '120 ms', '1.5%', '12'."""
    unit = alarm_metric(metric).unit
    if unit == "seconds":
        return f"{value:{digits}} s" if value >= 1 else f"{value * 1000:{digits}} ms"
    if unit == "fraction":
        return f"{value * 100:{digits}}%"
    return f"{value:g}"


def duration_text(seconds: float) -> str:
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    if seconds >= 120:
        return f"{seconds / 60:.1f}m"
    return f"{seconds:.0f}s"
