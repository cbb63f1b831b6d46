"""metrics.py: the metric dictionary (docs/benchmarks.md) computed on records with known
times — exact."""

from __future__ import annotations

import pytest

from reconciler.bench.metrics import e2e, gaps, level_metrics, meets, percentiles_ms, tpot, ttft
from reconciler.bench.records import ErrorKind, RequestRecord
from reconciler.catalog.latency import parse_latency_target
from reconciler.spec.result import Load


def record(
    index: int,
    sent: float,
    chunks: list[float],
    tokens: int | None = None,
    *,
    error: ErrorKind | None = None,
    status: int | None = None,
    scheduled: float | None = None,
) -> RequestRecord:
    return RequestRecord(
        index=index,
        scheduled_s=scheduled,
        sent_s=sent,
        chunks_s=tuple(chunks),
        done_s=chunks[-1] if chunks else sent + 0.001,
        input_length=600,
        output_length=tokens or max(len(chunks), 1),
        prompt_tokens=600 if error is None else None,
        output_tokens=tokens,
        error=error,
        status=status,
    )


def test_per_request_definitions() -> None:
    # sent at 1.0; first token at 1.2; chunks 30, 50 ms apart; five tokens in three chunks
    r = record(0, 1.0, [1.2, 1.23, 1.28], tokens=5)
    assert ttft(r) == pytest.approx(0.2)
    assert e2e(r) == pytest.approx(0.28)
    assert tpot(r) == pytest.approx((0.28 - 0.2) / 4)  # (E2E − TTFT) / (tokens − 1)
    assert gaps(r) == pytest.approx([0.03, 0.05])
    assert tpot(record(1, 0.0, [0.1], tokens=1)) is None  # one token: no TPOT


def test_usage_missing_counts_one_token_a_chunk() -> None:
    r = record(0, 0.0, [0.1, 0.2, 0.3])
    assert r.output_tokens is None and r.tokens == 3
    assert tpot(r) == pytest.approx(0.1)


def test_percentiles_interpolate_linearly_like_numpy() -> None:
    p = percentiles_ms([0.010, 0.020, 0.030, 0.040, 0.100])
    assert (p.mean, p.p50, p.p90, p.p95, p.p99) == (40.0, 30.0, 76.0, 88.0, 97.6)
    assert percentiles_ms([]).p50 is None


def test_a_closed_loop_level_exactly() -> None:
    # two clients; the first two requests are the warm-up (one a client)
    records = [
        record(0, 0.0, [0.5, 0.6], tokens=2),  # warm-up: slow first answers
        record(1, 0.0, [0.5, 0.7], tokens=2),
        record(2, 0.6, [0.7, 0.71, 0.72, 0.73], tokens=4),
        record(3, 0.7, [0.8, 0.82, 0.84, 0.86], tokens=4),
        record(4, 0.73, [0.83, 0.84, 0.85, 0.86], tokens=4),
    ]
    level = level_metrics(records, Load(concurrency=2), gpus=2)
    m = level.metrics
    assert level.warmup == 2 and level.sent == 5 and m.requests == 3 and m.errors == 0
    assert m.ttft_ms.p50 == 100.0 and m.ttft_ms.mean == 100.0
    assert m.e2e_ms.p50 == 130.0 and m.e2e_ms.p99 == pytest.approx(159.4)
    # TPOT per request: 10, 20 and 10 ms
    assert (m.tpot_ms.p50, m.tpot_ms.mean) == (10.0, pytest.approx(13.333))
    # ITL pooled: six gaps of 10 ms and three of 20 ms
    assert (m.itl_ms.p50, m.itl_ms.p90) == (10.0, 20.0)
    assert m.itl_ms.mean == pytest.approx(40 / 3, abs=1e-3)
    # window: first measured send (0.6) to last measured end (0.86) = 0.26 s; tokens inside:
    # the 12 of the measured requests and the warm-up's last chunk at 0.7 (one token)
    assert level.window_s == pytest.approx(0.26)
    assert m.output_tok_s == pytest.approx(13 / 0.26, abs=1e-3)
    assert m.output_tok_s_per_gpu == pytest.approx(13 / 0.26 / 2, abs=1e-3)
    # prompt tokens of the three requests whose first token came inside the window
    assert m.total_tok_s_per_gpu == pytest.approx((13 + 1800) / 0.26 / 2, abs=1e-2)
    assert m.goodput_rps is None  # no target
    assert level.output_tokens == 12 and level.short_outputs == 0


def test_warmup_keeps_at_least_one_request() -> None:
    level = level_metrics([record(0, 0.0, [0.1, 0.2])], Load(concurrency=8), gpus=1)
    assert level.warmup == 0 and level.metrics.requests == 1


def test_errors_by_kind_and_goodput() -> None:
    target = parse_latency_target("ttft:p99<150ms; tpot:p50<20ms")
    records = [
        record(0, 0.0, [0.1, 0.11, 0.12]),  # meets both
        record(1, 0.0, [0.2, 0.21]),  # TTFT 200 ms: misses
        record(2, 0.1, [0.2, 0.25]),  # TPOT 50 ms: misses
        record(3, 0.1, [0.15]),  # one token: TPOT not defined, TTFT meets
        record(4, 0.2, [], error=ErrorKind.HTTP, status=503),
        record(5, 0.2, [], error=ErrorKind.HTTP, status=503),
        record(6, 0.3, [0.35], error=ErrorKind.STREAM),
        record(7, 0.3, [], error=ErrorKind.TIMEOUT),
    ]
    level = level_metrics(records, Load(rate=10.0), gpus=1, target=target, warmup=0)
    m = level.metrics
    assert m.requests == 4 and m.errors == 4
    assert m.errors_by_kind == {"http_503": 2, "stream": 1, "timeout": 1}
    assert [meets(target, r) for r in records[:4]] == [True, False, False, True]
    window = level.window_s
    assert m.goodput_rps == pytest.approx(2 / window, abs=1e-3)


def test_itl_objective_judges_each_request_on_its_own_gaps() -> None:
    target = parse_latency_target("itl:p50<15ms")
    steady = record(0, 0.0, [0.1, 0.11, 0.12, 0.13])  # gaps 10 ms
    bursty = record(1, 0.0, [0.1, 0.101, 0.13, 0.16])  # gaps 1, 29, 30 ms: median 29
    assert meets(target, steady) and not meets(target, bursty)


def test_short_answers_are_counted() -> None:
    short = record(0, 0.0, [0.1, 0.2], tokens=2).model_copy(update={"output_length": 64})
    level = level_metrics([short], Load(concurrency=1), gpus=1)
    assert level.short_outputs == 1


def test_send_lag_reports_how_late_the_client_sent() -> None:
    records = [record(i, i * 0.1 + 0.002, [i * 0.1 + 0.05], scheduled=i * 0.1) for i in range(5)]
    level = level_metrics(records, Load(rate=10.0), gpus=1, warmup=0)
    assert level.send_lag_ms is not None and level.send_lag_ms.p50 == pytest.approx(2.0)
