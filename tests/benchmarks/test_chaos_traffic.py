"""benchmarks/chaos_traffic.py's invariant, no request fails without an alarm seeing it, on
the bot's own track format: router points as the alarm watch records them (restarts added
in) and keeps them in its lease note, read note after note. A whole chaos run takes most of
an hour as root, so it is not run here."""

from __future__ import annotations

from typing import Any

from reconciler.rollout.samples import Keep, Track, record, track_json
from reconciler.rollout.series import Scrape
from tests.benchmarks.test_autoscale import load

chaos = load("chaos_traffic")
KEY, URL = "chat-8b/canary", "http://10.9.0.2:29000/metrics"
KEEP = Keep.for_windows([300.0])


def note(track: Track) -> dict[str, Any]:
    tracks = {KEY: {URL: track_json(track)}}
    return {"checks": {"rollout": {"alarms": {"version": 2, "tracks": tracks}}}}


def scraped(track: Track, at: float, requests: float, errors: float) -> Track:
    counters = {"requests": requests, "error_rate": errors}
    return record(track, Scrape({}, counters, {}, None), at, KEEP)


def failure(ended: float) -> Any:
    return chaos.Failure("canary", "http://10.9.0.2:8000", ended - 0.5, ended, "HTTP 503")


def seen(*points: tuple[float, float, float]) -> Any:
    """The points gathered as the chaos run does, a note after each scrape."""
    gathered, track = chaos.RouterPoints(), Track("sglang-router")
    for at, requests, errors in points:
        track = scraped(track, at, requests, errors)
        gathered.add(note(track))
    return gathered


def key_of(stage: str) -> str:
    return f"chat-8b/{stage}"


def test_failures_the_routers_counted_are_seen() -> None:
    points = seen((100, 10, 0), (110, 30, 2), (120, 40, 2))
    assert chaos.unseen([failure(105), failure(108)], points, key_of, final=True) == {}


def test_a_failure_before_the_routers_first_point_is_unseen() -> None:
    points = seen((100, 10, 0), (110, 30, 0))
    [(stage, gap)] = chaos.unseen([failure(95)], points, key_of).items()
    assert (stage, gap.short, gap.late) == ("canary", 1, 0)
    assert "1 failed request(s) no router point counted" in gap.describe(stage)


def test_what_a_restarted_router_counted_before_its_restart_is_lost() -> None:
    # it answered two 5xx after the scrape at 110, then restarted: the next scrape counts 0
    points = seen((100, 10, 0), (110, 30, 1), (120, 5, 0))
    [gap] = chaos.unseen([failure(105), failure(112), failure(114)], points, key_of).values()
    assert gap.short == 2


def test_failures_after_the_last_point_count_only_at_the_end() -> None:
    points = seen((100, 10, 0), (110, 30, 0))
    assert chaos.unseen([failure(115)], points, key_of) == {}
    [gap] = chaos.unseen([failure(115)], points, key_of, final=True).values()
    assert (gap.short, gap.late) == (0, 1)


def test_points_thinned_out_of_later_notes_still_count() -> None:
    """The note keeps points about a quarter window apart: one gathered from an earlier note
    is kept, so a failure counted between two later-thinned points is still seen."""
    points = seen((100, 10, 0), (101, 12, 1), (102, 14, 1))
    assert sorted(points.points[(KEY, URL)]) == [100, 101, 102]
    assert chaos.unseen([failure(100.5)], points, key_of, final=True) == {}
