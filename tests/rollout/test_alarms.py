"""Alarms judged over windows of cumulative samples: histogram quantiles against hand-computed
values, windows and their coverage, min_requests, engine restarts, gauges, error rates."""

from __future__ import annotations

import math
import random

import pytest

from reconciler.rollout.alarms import Reading, evaluate, merge, over_bake, percentile, quantile
from reconciler.rollout.samples import Keep, Track, failed, record, track_from_json, track_json
from reconciler.rollout.series import Histogram, Scrape
from reconciler.spec.policy import Alarm

BOUNDS = (0.1, 0.5, 1.0)
KEEP = Keep.for_windows([300.0])


def hist(*per_bucket: float, total: float = 0.0, bounds: tuple[float, ...] = BOUNDS) -> Histogram:
    """A cumulative histogram from per-bucket counts (the last one is the +Inf bucket)."""
    counts, running = [], 0.0
    for c in per_bucket:
        running += c
        counts.append(running)
    return Histogram(bounds, tuple(counts), total)


def scrape(
    requests: float = 0,
    errors: float = 0,
    created: float | None = None,
    **values: Histogram | float,
) -> Scrape:
    histograms = {k: v for k, v in values.items() if isinstance(v, Histogram)}
    gauges = {k: float(v) for k, v in values.items() if not isinstance(v, Histogram)}
    return Scrape(histograms, {"requests": requests, "error_rate": errors}, gauges, created)


def track(*scrapes: tuple[float, Scrape], engine: str = "vllm", keep: Keep = KEEP) -> Track:
    t = Track(engine)
    for at, s in scrapes:
        t = record(t, s, at, keep)
    return t


def one(alarm: Alarm, tracks: dict[str, Track], now: float) -> Reading:
    return evaluate({"a": alarm}, tracks, now)[0]


TTFT_P99 = Alarm(metric="ttft", stat="p99", max=0.8, window=300, min_requests=50)


# -- quantiles ------------------------------------------------------------------------------


# 10 in (0, 0.1], 50 in (0.1, 0.5], 30 in (0.5, 1], 10 above 1 s
HAND = hist(10, 50, 30, 10)


@pytest.mark.parametrize(
    ("q", "expected"),
    [
        (0.05, 0.05),  # first bucket: from 0 up to 0.1, rank 5 of 10
        (0.10, 0.1),
        (0.50, 0.1 + 0.4 * 40 / 50),  # rank 50: 40 of the 50 in (0.1, 0.5]
        (0.75, 0.5 + 0.5 * 15 / 30),
        (0.90, 1.0),
        (0.99, 1.0),  # in the +Inf bucket: the highest finite bound, as Prometheus says
    ],
    ids=["p5", "p10", "p50", "p75", "p90", "p99-in-inf"],
)
def test_quantile_interpolates_inside_the_bucket_as_prometheus_does(
    q: float, expected: float
) -> None:
    assert quantile(q, HAND) == pytest.approx(expected)


def test_quantile_error_is_at_most_the_width_of_its_bucket() -> None:
    bounds = (0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5)  # vLLM's TTFT edges
    rng = random.Random(7)
    values = sorted(rng.lognormvariate(-2.0, 0.8) for _ in range(5000))
    counts = [sum(v <= b for v in values) for b in bounds] + [len(values)]
    h = Histogram(bounds, tuple(map(float, counts)), sum(values))
    for q in (0.5, 0.9, 0.95, 0.99):
        exact = values[math.ceil(q * len(values)) - 1]
        upper = next(b for b in bounds if exact <= b)
        lower = max((b for b in bounds if b < upper), default=0.0)
        assert abs(quantile(q, h) - exact) <= upper - lower


def test_histograms_with_other_bounds_merge_without_lowering_any_value() -> None:
    vllm = Histogram((0.1, 0.5, 1.0), (10.0, 10.0, 10.0, 10.0), 0.5)
    sglang = Histogram((0.2, 1.0), (0.0, 10.0, 10.0), 6.0)  # ten in (0.2, 1.0]
    merged = merge([vllm, sglang])
    assert merged.bounds == (0.1, 0.2, 0.5, 1.0)
    assert merged.counts == (10.0, 10.0, 10.0, 20.0, 20.0)
    assert quantile(0.75, merged) == pytest.approx(0.5 + 0.5 * 5 / 10)


def test_percentile_of_gauge_points_interpolates_between_ranks() -> None:
    assert percentile(0.5, [4.0, 1.0, 3.0, 2.0]) == pytest.approx(2.5)
    assert percentile(0.99, [1.0]) == 1.0


# -- windows ------------------------------------------------------------------------------


def slow_after_fast(keep: Keep = KEEP) -> Track:
    """100 fast requests in the first window, 100 slow ones in the second."""
    return track(
        (0, scrape(0, ttft=hist(0, 0, 0, 0))),
        (100, scrape(100, ttft=hist(100, 0, 0, 0, total=5))),
        (400, scrape(200, ttft=hist(100, 0, 0, 100, total=205))),
        keep=keep,
    )


def test_the_window_starts_at_the_newest_sample_at_or_before_now_minus_window() -> None:
    reading = one(TTFT_P99, {"e": slow_after_fast()}, now=400)
    assert reading.requests == 100 and reading.covered == 300
    assert reading.value == pytest.approx(1.0) and reading.firing
    assert reading.describe() == "ttft p99 1 s > 800 ms (100 requests, 5m)"


def test_a_window_longer_than_the_history_uses_its_first_sample_and_says_so() -> None:
    alarm = TTFT_P99.model_copy(update={"window": 600.0})
    reading = one(alarm, {"e": slow_after_fast(Keep.for_windows([600.0]))}, now=400)
    assert reading.requests == 200 and reading.covered == 400
    assert reading.value == pytest.approx(1.0)  # rank 198 of 200: past the last bound
    assert "(200 requests, 6.7m of 10m)" in reading.describe()


def test_an_earlier_window_is_judged_on_its_own_samples() -> None:
    fast = track(
        (0, scrape(0, ttft=hist(0, 0, 0, 0))),
        (300, scrape(100, ttft=hist(100, 0, 0, 0, total=5))),
    )
    reading = one(TTFT_P99, {"e": fast}, now=300)
    assert reading.value == pytest.approx(0.099) and not reading.firing


def test_fewer_requests_than_min_requests_are_not_judged() -> None:
    few = track(
        (0, scrape(0, ttft=hist(0, 0, 0, 0))),
        (300, scrape(49, ttft=hist(0, 0, 0, 49, total=200))),
    )
    reading = one(TTFT_P99, {"e": few}, now=300)
    assert reading.value is None and not reading.firing and reading.requests == 49
    assert reading.describe() == "ttft p99: not judged, 49 requests < 50 (5m)"


def test_one_sample_is_only_a_baseline() -> None:
    reading = one(TTFT_P99, {"e": track((0, scrape(500, ttft=hist(0, 0, 0, 500))))}, now=10)
    assert reading.value is None and reading.note == "no samples in the window yet"


def test_a_history_that_ended_before_the_window_is_not_judged() -> None:
    reading = one(TTFT_P99, {"e": slow_after_fast()}, now=400 + 300)
    assert reading.value is None and not reading.firing


def test_replicas_add_up_before_the_quantile() -> None:
    a = track((0, scrape(0, ttft=hist(0, 0, 0, 0))), (300, scrape(99, ttft=hist(99, 0, 0, 0))))
    b = track((0, scrape(0, ttft=hist(0, 0, 0, 0))), (300, scrape(1, ttft=hist(0, 0, 0, 1))))
    reading = one(TTFT_P99, {"a": a, "b": b}, now=300)
    assert reading.requests == 100
    assert reading.value == pytest.approx(0.1)  # one slow request of 100 is the p99 edge


def test_mean_is_the_sum_over_the_count_of_the_window() -> None:
    alarm = Alarm(metric="e2e", stat="mean", max=2, window=300, min_requests=1)
    t = track(
        (0, scrape(10, e2e=hist(0, 0, 10, 0, total=90))),  # a past that does not count
        (300, scrape(14, e2e=hist(0, 0, 10, 4, total=102))),
    )
    assert one(alarm, {"e": t}, now=300).value == pytest.approx(3.0)


def test_an_engine_without_the_histogram_says_so() -> None:
    alarm = Alarm(metric="tpot", stat="p99", max=0.1, window=300, min_requests=1)
    t = track((0, scrape(0)), (300, scrape(10)), engine="sglang")
    reading = one(alarm, {"e": t}, now=300)
    assert reading.value is None and reading.note == "sglang export no tpot histogram"


# -- restarts -----------------------------------------------------------------------------


def test_counters_that_went_down_are_a_restart_not_a_negative_increase() -> None:
    t = track(
        (0, scrape(1000, ttft=hist(1000, 0, 0, 0), created=1.0)),
        (200, scrape(1100, ttft=hist(1100, 0, 0, 0), created=1.0)),
        (250, scrape(60, ttft=hist(0, 0, 0, 60), created=None)),  # restarted, no _created
        (300, scrape(80, ttft=hist(0, 0, 0, 80), created=None)),
    )
    reading = one(TTFT_P99, {"e": t}, now=300)
    assert reading.requests == 80 + 100  # 100 before the restart, 80 since
    assert reading.value == pytest.approx(1.0) and reading.firing


def test_a_new_created_time_is_a_restart_even_when_counts_grew_past_the_old_ones() -> None:
    t = track(
        (0, scrape(0, ttft=hist(0, 0, 0, 0), created=1.0)),
        (100, scrape(10, ttft=hist(10, 0, 0, 0), created=1.0)),
        (300, scrape(60, ttft=hist(0, 0, 0, 60), created=2.0)),  # 60 since the restart
    )
    reading = one(TTFT_P99, {"e": t}, now=300)
    assert reading.requests == 60 + 10 - 0  # window 300: from 0, 10 before + 60 after
    assert reading.value == pytest.approx(1.0)


def test_new_bucket_bounds_start_the_engine_afresh() -> None:
    t = track(
        (0, scrape(0, ttft=hist(0, 0, 0, 0))),
        (100, scrape(100, ttft=hist(100, 0, 0, 0))),
        (200, scrape(5, ttft=hist(5, 0, bounds=(0.3,)))),
    )
    assert len(t.points) == 1 and t.offset is None


# -- error rate, gauges, missing engines --------------------------------------------------


ERRORS = Alarm(metric="error_rate", max="1%", window=300, min_requests=100)


def test_error_rate_is_failed_over_answered_requests() -> None:
    t = track((0, scrape(0, 0)), (300, scrape(400, 12)))
    reading = one(ERRORS, {"e": t}, now=300)
    assert reading.value == pytest.approx(0.03) and reading.firing
    assert reading.describe() == "error_rate 3% > 1% (400 requests, 5m)"


@pytest.mark.parametrize(
    ("engine_errors", "router_errors", "value", "at"),
    [(0, 60, 0.15, "router"), (12, 0, 0.03, ""), (12, 8, 0.03, "")],
    ids=["router-only-5xx", "engine-5xx-the-router-passed-on", "the-worse-counts"],
)
def test_error_rate_is_also_what_the_router_answered(
    engine_errors: float, router_errors: float, value: float, at: str
) -> None:
    engine = track((0, scrape(0, 0)), (300, scrape(400, engine_errors)))
    router = track((0, scrape(0, 0)), (300, scrape(400, router_errors)), engine="sglang-router")
    reading = one(ERRORS, {"e": engine, "r": router}, now=300)
    assert (reading.value, reading.at, reading.firing) == (pytest.approx(value), at, True)
    where = " at the router" if at else ""
    assert reading.describe() == f"error_rate {value * 100:g}% > 1%{where} (400 requests, 5m)"


def test_a_router_counts_for_no_metric_but_error_rate() -> None:
    engine = track(
        (0, scrape(0, 0, ttft=hist(0, 0, 0, 0))), (300, scrape(100, 0, ttft=hist(100, 0, 0, 0)))
    )
    router = track((0, scrape(0, 0)), (300, scrape(900, 0)), engine="sglang-router")
    reading = one(TTFT_P99, {"e": engine, "r": router}, now=300)
    assert reading.requests == 100 and reading.at == ""


@pytest.mark.parametrize(
    ("stat", "expected"),
    [("value", 0.5), ("mean", (0.5 + 0.99 + 0.5) / 3), ("p99", 0.99 - 0.49 * 0.02)],
    ids=["newest", "mean-of-window-points", "p99-of-window-points"],
)
def test_gauges_take_the_points_inside_the_window_of_the_busiest_engine(
    stat: str, expected: float
) -> None:
    alarm = Alarm(metric="kv_usage", stat=stat, max="95%", window=300, min_requests=1)
    busy = track(
        (0, scrape(0, kv_usage=1.0)),  # before the window: left out
        (100, scrape(5, kv_usage=0.5)),
        (200, scrape(8, kv_usage=0.99)),
        (300, scrape(9, kv_usage=0.5)),
    )
    idle = track((0, scrape(0, kv_usage=0.1)), (300, scrape(1, kv_usage=0.1)))
    reading = one(alarm, {"busy": busy, "idle": idle}, now=300)
    assert reading.value == pytest.approx(expected) and reading.requests == 10


def test_an_engine_that_did_not_answer_adds_nothing_and_is_named() -> None:
    good = track((0, scrape(0, 0)), (300, scrape(200, 0)))
    lost = failed(track((0, scrape(0, 0))), "connection refused")
    reading = one(ERRORS, {"http://a/metrics": good, "http://b/metrics": lost}, now=300)
    assert reading.value == 0 and not reading.firing and reading.missing == ("http://b/metrics",)
    assert reading.describe().endswith("(not answering: http://b/metrics)")


def test_no_engine_answering_is_never_an_alarm() -> None:
    lost = failed(Track("vllm"), "timed out")
    reading = one(ERRORS, {"http://a/metrics": lost}, now=300)
    assert reading.value is None and not reading.firing and reading.note == "no engine answered"


def test_a_scrape_not_newer_than_the_last_one_is_ignored() -> None:
    t = track((100, scrape(10)), (100, scrape(20)), (50, scrape(30)))
    assert [(p.at, p.counters["requests"]) for p in t.points] == [(100, 10)]


# -- over the whole bake --------------------------------------------------------------------


def test_the_bake_reading_counts_every_request_since_the_bake_began() -> None:
    """Traffic early in a 600 s bake, none in the last window: the window alone saw no
    request, the bake saw them all (the first point survives thinning)."""
    alarm = TTFT_P99.model_copy(update={"window": 60.0, "min_requests": 50})
    keep = Keep.for_alarms([alarm])
    busy = scrape(requests=80, ttft=hist(0, 80, 0, 0))
    t = track((0, scrape(ttft=hist(0, 0, 0, 0))), (100, busy), (300, busy), (600, busy), keep=keep)
    assert len(t.points) < 4 and t.start is not None and t.start.at == 0
    [last] = evaluate({"a": alarm}, {"u": t}, 600)
    assert (last.value, last.requests) == (None, 0)
    [bake] = over_bake({"a": alarm}, {"u": t}, since=0, now=600)
    assert bake.requests == 80 and bake.value == pytest.approx(0.1 + 0.4 * 0.99)
    assert bake.describe() == "ttft p99 496 ms ≤ 800 ms (80 requests, 10m bake)"


def test_a_quiet_bake_says_it_was_not_judged() -> None:
    t = track((0, scrape()), (4, scrape(requests=2, ttft=hist(2, 0, 0, 0))))
    [bake] = over_bake({"a": TTFT_P99}, {"u": t}, since=0, now=4)
    assert (bake.value, bake.firing) == (None, False)
    assert bake.describe() == "ttft p99: not judged, 2 requests < 50 (4s bake)"


def test_the_first_point_round_trips_through_json() -> None:
    t = track((0, scrape(ttft=hist(1, 0, 0, 0))), (10, scrape(requests=3)))
    assert track_from_json(track_json(t)) == t


def test_a_gauge_over_the_bake_takes_the_points_kept() -> None:
    alarm = Alarm(metric="kv_usage", stat="p99", max=0.95, window=60.0, min_requests=1)
    keep = Keep.for_alarms([alarm])
    t = track(
        (0, scrape(kv_usage=0.1)), (100, scrape(requests=5, kv_usage=0.97)),
        (140, scrape(requests=9, kv_usage=0.5)), (150, scrape(requests=9, kv_usage=0.4)),
        keep=keep,
    )  # fmt: skip
    [bake] = over_bake({"a": alarm}, {"u": t}, since=0, now=150)
    kept = [p.gauges["kv_usage"] for p in t.points if p.at > 0]
    assert bake.requests == 9 and bake.value == pytest.approx(percentile(0.99, kept))
