"""Adapter: watching a stage's alarms — scraping its engines' /metrics (every replica) and
its routers' (what clients were answered) into tracks, or, with a Prometheus server
configured, asking it.

The tracks round-trip through `state()` (JSON) because the bot keeps them in its lease note
between `denv reconcile --once` runs; they are thinned to what the alarms' windows need.
`now` is Unix time, the same clock in every run.
"""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from reconciler.engines.base import url as base_url
from reconciler.engines.units import EngineSeries, Unit
from reconciler.rollout.alarms import Reading, duration_text, evaluate, over_bake
from reconciler.rollout.promql import AlarmQueries, Answer, instance, queries, reading
from reconciler.rollout.samples import (
    Keep,
    Track,
    baseline,
    failed,
    record,
    track_from_json,
    track_json,
)
from reconciler.rollout.series import ROUTERS, ParseError, at_routers, parse, series_for
from reconciler.spec.policy import Alarm

STATE_VERSION = 2  # 2: counters by name (1: requests, errors); an older state starts afresh
MAX_PARALLEL = 16  # scrapes in flight at once


def metrics_targets(units: Iterable[Unit]) -> list[tuple[str, str]]:
    """(engine, metrics URL) of every engine unit and of every router whose series are known
    (`series.ROUTERS`: its errors are what clients saw)."""
    return [
        (u.engine, base_url(u.address, u.metrics.port) + u.metrics.path)
        for u in units
        if u.metrics is not None and (u.role != "router" or u.engine in ROUTERS)
    ]


class AlarmWatch:
    """Keeps cumulative samples per key (e.g. 'release/stage') long enough for each alarm's
    window, and reads the alarms from them."""

    def __init__(
        self,
        alarms: Mapping[str, Alarm],
        state: Mapping[str, Any] | None = None,
        prometheus: str | None = None,
        timeout: float = 2.0,
    ) -> None:
        self.alarms = dict(alarms)
        self._wanted = frozenset(a.metric for a in self.alarms.values())
        self._keep = Keep.for_alarms(self.alarms.values())
        self._prometheus = prometheus.rstrip("/") if prometheus else None
        self._timeout = timeout
        self._tracks = _load(state)
        self._queried: dict[str, list[Reading]] = {}
        self._targets: dict[str, list[tuple[str, str]]] = {}  # the last scrape's, per key

    def scrape(
        self,
        key: str,
        targets: Sequence[tuple[str, str]],
        now: float,
        since: float | None = None,
        routers_since: float | None = None,
    ) -> None:
        """One sample of each (engine, metrics URL); an engine that does not answer gets no
        sample, only an error its readings name. Engines no longer listed are dropped.
        `since`: when the stage's bake started. No engine's window reaches back before it:
        scraped tracks start then (`start_bake`), and Prometheus, which keeps everything, is
        asked for a window no longer than the bake so far (what came before, deploy-time
        parity's prompts included, is not the stage's traffic). `routers_since`: when the
        revision's roll started, the same for the routers (`start_roll`): what they refused
        clients while it rolled out counts."""
        self._targets[key] = list(targets)
        if self._prometheus is not None:
            alarms = None if since is None else _clipped(self.alarms, now - since)
            routers_alarms = alarms
            if routers_since is not None:
                routers_alarms = _clipped(self.alarms, now - routers_since)
            self._queried[key] = self._query(self._prometheus, targets, now, alarms, routers_alarms)
            return
        before = self._tracks.get(key, {})
        answers = fetch_all([u for _, u in targets], self._timeout)
        tracks: dict[str, Track] = {}
        for engine, url in targets:
            track = before.get(url)
            track = track if track is not None and track.engine == engine else Track(engine)
            tracks[url] = self._recorded(track, answers[url], now)
        self._tracks[key] = tracks

    def readings(self, key: str, now: float) -> list[Reading]:
        if self._prometheus is None:
            return evaluate(self.alarms, self._tracks.get(key, {}), now)
        if key in self._queried:
            return self._queried[key]
        note = "Prometheus not asked yet"
        return [Reading(n, a, None, 0, False, note=note) for n, a in self.alarms.items()]

    def over_bake(self, key: str, since: float, now: float) -> list[Reading]:
        """The alarms read over the whole bake, from `since` (when every replica was ready:
        the stage's first scrape) to the last scrape."""
        if self._prometheus is None:
            return over_bake(self.alarms, self._tracks.get(key, {}), since, now)
        bake = {
            name: alarm.model_copy(update={"window": max(now - since, alarm.window)})
            for name, alarm in self.alarms.items()
        }
        found = self._query(self._prometheus, self._targets.get(key, []), now, bake)
        return [replace(r, over=f"{duration_text(now - since)} bake") for r in found]

    def start_roll(self, key: str) -> None:
        """A revision starts rolling out (or back): the engines' windows start again, and each
        router's track keeps only its newest point, the baseline its next scrape counts from,
        so that what a router answered since the last pass counts for the new revision and
        no request falls between two windows."""
        self._queried.pop(key, None)
        routers = {
            url: baseline(track)
            for url, track in self._tracks.pop(key, {}).items()
            if track.engine in ROUTERS and track.points
        }
        if routers:
            self._tracks[key] = routers

    def start_bake(self, key: str) -> None:
        """Every replica is ready: the engines' windows start now (what came before,
        deploy-time parity's prompts included, is not the stage's traffic); the routers' go on
        from the roll's start."""
        self._queried.pop(key, None)
        routers = {u: t for u, t in self._tracks.get(key, {}).items() if t.engine in ROUTERS}
        self._tracks[key] = routers

    def state(self) -> dict[str, Any]:
        tracks = {
            key: {url: track_json(t) for url, t in by_url.items()}
            for key, by_url in self._tracks.items()
        }
        return {"version": STATE_VERSION, "tracks": tracks}

    def _recorded(self, track: Track, answer: str | Exception, now: float) -> Track:
        series = series_for(track.engine)
        if series is None:
            return failed(track, f"no alarm metrics known for engine '{track.engine}'")
        if isinstance(answer, Exception):
            return failed(track, _why(answer, self._timeout))
        try:
            return record(track, parse(series, answer, self._wanted), now, self._keep)
        except ParseError as exc:
            return failed(track, str(exc))

    def _query(
        self,
        server: str,
        targets: Sequence[tuple[str, str]],
        now: float,
        alarms: Mapping[str, Alarm] | None = None,
        at_routers_alarms: Mapping[str, Alarm] | None = None,
    ) -> list[Reading]:
        by_engine: dict[str, list[str]] = {}
        kinds: dict[str, EngineSeries] = {}
        for engine, url in targets:
            series = series_for(engine)
            if series is not None:
                kinds[engine] = series
                by_engine.setdefault(engine, []).append(instance(url))
        found: list[Reading] = []
        for name, alarm in (alarms or self.alarms).items():
            asked = {
                engine: instances
                for engine, instances in by_engine.items()
                if engine not in ROUTERS or at_routers(alarm.metric)
            }
            at_router = (at_routers_alarms or {}).get(name, alarm)
            try:
                answers = {
                    engine: self._answer(
                        server,
                        queries(
                            at_router if engine in ROUTERS else alarm, kinds[engine], instances
                        ),
                        now,
                    )
                    for engine, instances in asked.items()
                }
            except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
                note = f"Prometheus did not answer: {_why(exc, self._timeout)}"
                found.append(Reading(name, alarm, None, 0, False, note=note))
                continue
            engines = [a for e, a in answers.items() if e not in ROUTERS]
            routers = [a for e, a in answers.items() if e in ROUTERS]
            found.append(reading(name, alarm, engines, routers))
        return found

    def _answer(self, server: str, q: AlarmQueries, now: float) -> Answer:
        def ask(text: str | None) -> float | None:
            return _ask(server, text, now, self._timeout) if text else None

        return Answer(ask(q.requests) or 0.0, ask(q.counted), ask(q.value))


def _clipped(alarms: Mapping[str, Alarm], seconds: float) -> dict[str, Alarm]:
    """The alarms with windows no longer than `seconds` (at least one second: Prometheus
    needs a range)."""
    bound = max(seconds, 1.0)
    return {
        name: alarm.model_copy(update={"window": bound}) if alarm.window > bound else alarm
        for name, alarm in alarms.items()
    }


def _load(state: Mapping[str, Any] | None) -> dict[str, dict[str, Track]]:
    """Tracks from a saved state; a key whose state is unreadable starts afresh."""
    if not state or state.get("version") != STATE_VERSION:
        return {}
    loaded: dict[str, dict[str, Track]] = {}
    for key, by_url in dict(state.get("tracks") or {}).items():
        try:
            loaded[key] = {url: track_from_json(t) for url, t in by_url.items()}
        except (KeyError, ValueError, TypeError, AttributeError):
            continue
    return loaded


def _get(url: str, timeout: float) -> str:
    request = urllib.request.Request(url, headers={"Accept": "text/plain"})
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        body: bytes = answer.read()
        return body.decode("utf-8", "replace")


def fetch_all(urls: list[str], timeout: float) -> dict[str, str | Exception]:
    """Each URL's text, or why it did not answer; at most MAX_PARALLEL at once."""

    def one(url: str) -> str | Exception:
        try:
            return _get(url, timeout)
        except (OSError, ValueError) as exc:  # URLError, HTTPError and timeouts are OSErrors
            return exc

    if not urls:
        return {}
    with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL, len(urls))) as pool:
        return dict(zip(urls, pool.map(one, urls), strict=True))


def _ask(server: str, query: str, now: float, timeout: float) -> float | None:
    """One instant query; None for no result or NaN (no data in the window)."""
    params = urllib.parse.urlencode({"query": query, "time": f"{now:.3f}"})
    answer = json.loads(_get(f"{server}/api/v1/query?{params}", timeout))
    if answer.get("status") != "success":
        raise ValueError(f"query failed: {answer.get('error', 'no reason given')}")
    data = answer["data"]
    result = data["result"]
    if data["resultType"] == "scalar":
        value = float(result[1])
    elif not result:
        return None
    else:
        value = float(result[0]["value"][1])
    return None if math.isnan(value) else value


def _why(exc: BaseException, timeout: float) -> str:
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code}"
    if isinstance(exc, TimeoutError):
        return f"no answer within {timeout:g}s"
    if isinstance(exc, urllib.error.URLError):
        reason = exc.reason
        return f"no answer within {timeout:g}s" if isinstance(reason, TimeoutError) else str(reason)
    return str(exc) or type(exc).__name__
