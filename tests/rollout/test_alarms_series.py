"""Engine /metrics text into engine-neutral values (vLLM's and SGLang's names), and the
history kept for the windows: thinned, and small and exact through JSON."""

from __future__ import annotations

import itertools
import json

import pytest

from reconciler.engines.cards import card
from reconciler.rollout.alarms import evaluate
from reconciler.rollout.samples import Keep, Track, record, track_from_json, track_json
from reconciler.rollout.series import ROUTERS, Histogram, ParseError, Scrape, parse
from reconciler.spec.policy import Alarm

ALL = frozenset({"ttft", "itl", "tpot", "kv_usage", "waiting", "error_rate"})

VLLM_TEXT = """\
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="m"} 3.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.5",model_name="m"} 5.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 6.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 3.5
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 6.0
vllm:time_to_first_token_seconds_created{engine="0",model_name="m"} 1700000000.5
vllm:time_to_first_token_seconds_bucket{engine="1",le="0.1",model_name="m"} 1.0
vllm:time_to_first_token_seconds_bucket{engine="1",le="0.5",model_name="m"} 1.0
vllm:time_to_first_token_seconds_bucket{engine="1",le="+Inf",model_name="m"} 2.0
vllm:time_to_first_token_seconds_sum{engine="1",model_name="m"} 2.0
vllm:time_to_first_token_seconds_count{engine="1",model_name="m"} 2.0
vllm:time_to_first_token_seconds_created{engine="1",model_name="m"} 1700000001.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.75
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 3.0
# TYPE http_requests_total counter
http_requests_total{handler="/v1/completions",method="POST",status="2xx"} 7.0
http_requests_total{handler="/v1/chat/completions",method="POST",status="5xx"} 1.0
http_requests_total{handler="/v1/models",method="GET",status="2xx"} 40.0
"""

SGLANG_TEXT = """\
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_bucket{le="0.1",model_name="m"} 2.0
sglang:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} 4.0
sglang:time_to_first_token_seconds_sum{model_name="m"} 1.0
sglang:time_to_first_token_seconds_count{model_name="m"} 4.0
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="m"} 0.5
# TYPE sglang:num_requests_total counter
sglang:num_requests_total{model_name="m"} 9.0
# TYPE sglang:num_aborted_requests_total counter
sglang:num_aborted_requests_total{model_name="m"} 2.0
"""


def test_vllm_series_are_summed_over_engine_cores_and_filtered_by_route() -> None:
    got = parse(card("vllm").ALARM_SERIES, VLLM_TEXT, ALL)
    assert got.histograms == {"ttft": Histogram((0.1, 0.5), (4.0, 6.0, 8.0), 5.5)}
    assert got.counters == {"requests": 8.0, "error_rate": 1.0}  # /v1/models is not a request
    assert got.gauges == {"kv_usage": 0.75, "waiting": 3.0}  # gauges: the largest core's
    assert got.created == 1700000000.5


def test_sglang_names_and_what_it_lacks() -> None:
    got = parse(card("sglang").ALARM_SERIES, SGLANG_TEXT, ALL)
    assert got.histograms == {"ttft": Histogram((0.1,), (2.0, 4.0), 1.0)}
    assert got.counters == {"requests": 9.0, "error_rate": 2.0}
    assert got.gauges == {"kv_usage": 0.5}
    assert got.created is None


# sglang-router 0.3.2's answers to clients, by status (read from a running router)
ROUTER_TEXT = """\
# TYPE smg_http_responses_total counter
smg_http_responses_total{status_code="500",error_code="call_upstream_request_error"} 3
smg_http_responses_total{status_code="503",error_code=""} 2
smg_http_responses_total{status_code="404",error_code=""} 48
smg_http_responses_total{status_code="200",error_code=""} 6
# TYPE smg_router_upstream_responses_total counter
smg_router_upstream_responses_total{router_type="http",status_code="500",error_code=""} 15
"""


def test_a_router_counts_what_it_answered_clients() -> None:
    got = parse(ROUTERS["sglang-router"], ROUTER_TEXT, ALL)
    assert got.counters == {"requests": 59.0, "error_rate": 5.0}  # a client's 404 is no error
    assert got.histograms == {} and got.gauges == {}


def test_only_the_wanted_metrics_are_read() -> None:
    got = parse(card("vllm").ALARM_SERIES, VLLM_TEXT, frozenset({"kv_usage"}))
    assert got.histograms == {} and got.gauges == {"kv_usage": 0.75}


def test_text_that_is_not_prometheus_is_an_error() -> None:
    with pytest.raises(ParseError):
        parse(card("vllm").ALARM_SERIES, "<html>oops</html>\n", ALL)


def tick(at: float, n: float) -> Scrape:
    bounds = tuple(0.001 * 2**i for i in range(20))
    counts = tuple(float(min(n, i * n // 10)) for i in range(21))  # whole numbers, as engines count
    h = Histogram(bounds, counts, n * 0.123456789)
    return Scrape({"ttft": h, "itl": h}, {"requests": n, "error_rate": 0.0}, {"kv_usage": 0.5}, 1.0)


ALARMS = {
    "ttft": Alarm(metric="ttft", stat="p99", max=1, window=300, min_requests=1),
    "itl": Alarm(metric="itl", stat="p99", max=1, window=300, min_requests=1),
    "kv": Alarm(metric="kv_usage", max=0.95, window=600, min_requests=1),
}


def test_history_is_thinned_to_the_windows_and_stays_small_in_json() -> None:
    keep = Keep.for_alarms(ALARMS.values())  # points 75 s apart, back 10 minutes
    t = Track("vllm")
    for i in range(200):  # a scrape every 10 s for 2000 s
        t = record(t, tick(i * 10.0, i * 7.0), i * 10.0, keep)
    assert t.points[0].at <= 1990 - 600 < t.points[1].at
    assert all(b.at - a.at >= 75 for a, b in itertools.pairwise(t.points[:-1]))
    assert len(t.points) <= 12
    # histograms are kept only as far back as their own (5 minute) windows need
    assert [p.at for p in t.points if p.histograms] == [1680, 1760, 1840, 1920, 1990]
    size = len(json.dumps(track_json(t)))
    assert size < 2500, size  # two histograms of 21 buckets, a gauge, one engine
    readings = evaluate(ALARMS, {"u": t}, 1990)
    assert [r.covered for r in readings] == [310, 310, 630]
    assert all(r.value is not None for r in readings)


def test_json_round_trip_reads_the_same() -> None:
    keep = Keep.for_windows([300.0])
    t = Track("sim")
    for i, n in enumerate((0, 10, 500, 3)):  # the last one is a restart
        t = record(t, tick(i * 100.0, float(n)), i * 100.0, keep)
    back = track_from_json(json.loads(json.dumps(track_json(t))))
    assert back == t
    alarm = {"ttft": Alarm(metric="ttft", stat="p95", max=1, window=300, min_requests=1)}
    assert evaluate(alarm, {"u": back}, 300) == evaluate(alarm, {"u": t}, 300)
