"""Pure logic: the scrape history of one engine (a `Track`) — counters made monotonic across
engine restarts, thinned to what the alarms' windows need, and its compact JSON form.

A restart shows as a counter or histogram count that went down, or a new `_created` time;
from then on the values before it are added to the new ones (an `offset`), as Prometheus'
`increase()` does, so the difference of any two points is what happened between them. Points
are kept about a quarter of the shortest window apart, back to the newest point at or before
the longest window's start: each window then spans at most a quarter more than it says.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from reconciler.rollout.series import Histogram, Scrape, read_as
from reconciler.spec.policy import Alarm


@dataclass(frozen=True)
class Point:
    """One scrape: cumulative values (restarts already added in) and gauges, at Unix time."""

    at: float
    histograms: Mapping[str, Histogram]
    counters: Mapping[str, float]
    gauges: Mapping[str, float]


@dataclass(frozen=True)
class Track:
    """One engine's history, oldest point first; `error` says why its latest scrape failed."""

    engine: str
    points: tuple[Point, ...] = ()
    offset: Point | None = None  # values before the last restart, added to every scrape since
    created: float | None = None
    error: str | None = None
    start: Point | None = None  # the first point, never thinned: readings over the whole bake


@dataclass(frozen=True)
class Keep:
    """How much history the alarms need: their longest window, the spacing of points, and
    the window of each histogram (older points drop it: the largest part of a point)."""

    longest: float
    spacing: float
    histograms: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def for_windows(cls, windows: list[float]) -> Keep:
        return cls(max(windows, default=0.0), max(min(windows, default=0.0) / 4, 1.0))

    @classmethod
    def for_alarms(cls, alarms: Iterable[Alarm]) -> Keep:
        alarms = list(alarms)
        keep = cls.for_windows([a.window for a in alarms])
        histograms: dict[str, float] = {}
        for a in alarms:
            if read_as(a.metric) == "histogram":
                histograms[a.metric] = max(histograms.get(a.metric, 0.0), a.window)
        return replace(keep, histograms=histograms)


def record(track: Track, scrape: Scrape, at: float, keep: Keep) -> Track:
    """The track with one more successful scrape."""
    newest = track.points[-1] if track.points else None
    if newest is not None and at <= newest.at:  # a clock that went back: keep what we have
        return replace(track, error=None)
    if newest is None or not _same_bounds(newest, scrape):
        point = Point(at, scrape.histograms, scrape.counters, scrape.gauges)
        return Track(track.engine, (point,), None, scrape.created, start=point)
    offset = track.offset
    if _restarted(track, newest, scrape):
        offset = newest
    point = _add(Point(at, scrape.histograms, scrape.counters, scrape.gauges), offset)
    points = thin((*track.points, point), at, keep)
    return Track(track.engine, points, offset, scrape.created, start=track.start)


def failed(track: Track, error: str) -> Track:
    return replace(track, error=error)


def window(track: Track, now: float, seconds: float) -> tuple[Point, Point] | None:
    """(baseline, newest) for a window ending now: the baseline is the newest point at or
    before its start, else the oldest. None without two points or with nothing inside it."""
    if len(track.points) < 2 or track.points[-1].at <= now - seconds:
        return None
    start = now - seconds
    before = [p for p in track.points[:-1] if p.at <= start]
    return (before[-1] if before else track.points[0]), track.points[-1]


def baseline(track: Track) -> Track:
    """The track cut to its newest point: the start of a new window, the restarts before it
    still added in."""
    newest = track.points[-1]
    return replace(track, points=(newest,), start=newest)


def since_start(track: Track) -> Track:
    """The track with its first point back before the points kept: a window from it spans
    everything the track saw (gauges: the points kept)."""
    if track.start is None or not track.points or track.start.at >= track.points[-1].at:
        return track
    later = tuple(p for p in track.points if p.at > track.start.at)
    return replace(track, points=(track.start, *later))


def thin(points: tuple[Point, ...], now: float, keep: Keep) -> tuple[Point, ...]:
    """Points back to the newest one at or before the longest window's start, spaced;
    a histogram only back to the newest point at or before its own window's start."""
    kept = [points[_first(points, now - keep.longest)]]
    for point in points[_first(points, now - keep.longest) + 1 : -1]:
        if point.at - kept[-1].at >= keep.spacing:
            kept.append(point)
    if points[-1] is not kept[-1]:
        kept.append(points[-1])
    for metric, seconds in keep.histograms.items():
        for i in range(_first(tuple(kept), now - seconds)):
            if metric in kept[i].histograms:
                rest = {m: h for m, h in kept[i].histograms.items() if m != metric}
                kept[i] = replace(kept[i], histograms=rest)
    return tuple(kept)


def _first(points: tuple[Point, ...], start: float) -> int:
    """The index of the newest point at or before `start`, else 0."""
    return max((i for i, p in enumerate(points) if p.at <= start), default=0)


def minus(new: Histogram, old: Histogram) -> Histogram:
    counts = tuple(a - b for a, b in zip(new.counts, old.counts, strict=True))
    return Histogram(new.bounds, counts, new.total - old.total)


def _same_bounds(point: Point, scrape: Scrape) -> bool:
    both = point.histograms.keys() & scrape.histograms.keys()
    return all(point.histograms[m].bounds == scrape.histograms[m].bounds for m in both)


def _restarted(track: Track, newest: Point, scrape: Scrape) -> bool:
    if None not in (track.created, scrape.created) and scrape.created != track.created:
        return True
    offset = track.offset
    for name in scrape.counters:
        before = newest.counters.get(name, 0.0) - (offset.counters.get(name, 0.0) if offset else 0)
        if scrape.counters.get(name, 0.0) < before:
            return True
    for metric, histogram in scrape.histograms.items():
        if metric in newest.histograms:
            shift = offset.histograms.get(metric) if offset else None
            before = newest.histograms[metric].count - (shift.count if shift else 0.0)
            if histogram.count < before:
                return True
    return False


def _add(point: Point, offset: Point | None) -> Point:
    if offset is None:
        return point
    histograms = {
        m: _plus(h, offset.histograms[m]) if m in offset.histograms else h
        for m, h in point.histograms.items()
    }
    counters = {k: v + offset.counters.get(k, 0.0) for k, v in point.counters.items()}
    return Point(point.at, histograms, counters, point.gauges)


def _plus(a: Histogram, b: Histogram) -> Histogram:
    counts = tuple(x + y for x, y in zip(a.counts, b.counts, strict=True))
    return Histogram(a.bounds, counts, a.total + b.total)


# -- JSON: bounds once per track, counts per bucket (small numbers), whole numbers as ints ----


def track_json(track: Track) -> dict[str, Any]:
    every = (*track.points, *((track.start,) if track.start is not None else ()))
    bounds = {m: list(h.bounds) for p in every for m, h in p.histograms.items()}
    out: dict[str, Any] = {"engine": track.engine, "bounds": bounds}
    out["points"] = [_point_json(p) for p in track.points]
    if track.offset is not None:
        out["offset"] = _point_json(track.offset)
    if track.start is not None:
        out["start"] = _point_json(track.start)
    if track.created is not None:
        out["created"] = track.created
    if track.error is not None:
        out["error"] = track.error
    return out


def track_from_json(data: Mapping[str, Any]) -> Track:
    """The track back from `track_json` (ValueError, KeyError or TypeError if malformed)."""
    bounds = {m: tuple(float(b) for b in v) for m, v in data["bounds"].items()}
    points = tuple(_point_from(p, bounds) for p in data["points"])
    offset = _point_from(data["offset"], bounds) if "offset" in data else None
    created = float(data["created"]) if "created" in data else None
    error = str(data["error"]) if "error" in data else None
    start = _point_from(data["start"], bounds) if "start" in data else None
    return Track(str(data["engine"]), points, offset, created, error, start)


def _num(value: float) -> float | int:
    return int(value) if float(value).is_integer() else value


def _point_json(point: Point) -> dict[str, Any]:
    histograms = {}
    for metric, h in point.histograms.items():
        per_bucket = [h.counts[0], *(b - a for a, b in itertools.pairwise(h.counts))]
        histograms[metric] = [[_num(c) for c in per_bucket], _num(h.total)]
    out: dict[str, Any] = {
        "at": _num(point.at),
        "c": {k: _num(v) for k, v in point.counters.items()},
    }
    if histograms:
        out["h"] = histograms
    if point.gauges:
        out["g"] = {k: _num(v) for k, v in point.gauges.items()}
    return out


def _point_from(data: Mapping[str, Any], bounds: Mapping[str, tuple[float, ...]]) -> Point:
    histograms = {}
    for metric, (per_bucket, total) in data.get("h", {}).items():
        counts, running = [], 0.0
        for c in per_bucket:
            running += float(c)
            counts.append(running)
        if len(counts) != len(bounds[metric]) + 1 or any(math.isnan(c) for c in counts):
            raise ValueError(f"{metric}: {len(counts)} buckets for {len(bounds[metric])} bounds")
        histograms[metric] = Histogram(bounds[metric], tuple(counts), float(total))
    counters = {str(k): float(v) for k, v in data["c"].items()}
    gauges = {k: float(v) for k, v in data.get("g", {}).items()}
    return Point(float(data["at"]), histograms, counters, gauges)
