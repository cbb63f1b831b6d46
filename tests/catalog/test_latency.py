from __future__ import annotations

import pytest

from reconciler.catalog.latency import LatencyTarget, Slo, Verdict, parse_latency_target
from reconciler.errors import UsageError
from reconciler.spec.result import Metrics


@pytest.mark.parametrize(
    ("text", "slos", "canonical"),
    [
        pytest.param("p99<1.5s", [("ttft", "p99", 1500.0)], "ttft:p99<1.5s", id="default-ttft"),
        pytest.param("ttft:p99<1.5s", [("ttft", "p99", 1500.0)], "ttft:p99<1.5s", id="ttft"),
        pytest.param("itl:p95<50ms", [("itl", "p95", 50.0)], "itl:p95<50ms", id="itl-ms"),
        pytest.param("e2e:p90<20s", [("e2e", "p90", 20000.0)], "e2e:p90<20s", id="e2e"),
        pytest.param("tpot:p50<30ms", [("tpot", "p50", 30.0)], "tpot:p50<30ms", id="tpot"),
        pytest.param("tpot:median<30ms", [("tpot", "p50", 30.0)], "tpot:p50<30ms", id="median"),
        pytest.param("e2e:mean<9s", [("e2e", "mean", 9000.0)], "e2e:mean<9s", id="mean"),
        pytest.param("p99<=1500ms", [("ttft", "p99", 1500.0)], "ttft:p99<1.5s", id="le"),
        pytest.param("TTFT:P99 < 2 S", [("ttft", "p99", 2000.0)], "ttft:p99<2s", id="case-space"),
        pytest.param(
            "p99<1.5s; itl:p95<50ms",
            [("ttft", "p99", 1500.0), ("itl", "p95", 50.0)],
            "ttft:p99<1.5s, itl:p95<50ms",
            id="semicolon",
        ),
        pytest.param(
            "ttft:p50<400ms,tpot:p99<0.1s,",
            [("ttft", "p50", 400.0), ("tpot", "p99", 100.0)],
            "ttft:p50<400ms, tpot:p99<100ms",
            id="comma-trailing",
        ),
    ],
)
def test_parse_valid(text: str, slos: list[tuple[str, str, float]], canonical: str) -> None:
    target = parse_latency_target(text)
    assert [(s.metric, s.stat, s.max_ms) for s in target.slos] == slos
    assert str(target) == canonical
    assert parse_latency_target(str(target)) == target


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("p99", "latency target 'p99': missing '<limit>'", id="no-limit"),
        pytest.param("p99<", "latency target 'p99<': missing the limit after '<'", id="empty"),
        pytest.param(
            "ttft:p42<1s",
            "latency target 'ttft:p42<1s': unknown percentile 'p42' "
            "(use p50, p90, p95, p99 or mean)",
            id="percentile",
        ),
        pytest.param(
            "foo:p99<1s",
            "latency target 'foo:p99<1s': unknown metric 'foo' (use ttft, tpot, itl or e2e)",
            id="metric",
        ),
        pytest.param(
            "p99<1.5", "latency target 'p99<1.5': limit '1.5' has no unit (use s or ms", id="unit"
        ),
        pytest.param(
            "p99<1.5parsecs",
            "latency target 'p99<1.5parsecs': unknown unit 'parsecs' in '1.5parsecs'",
            id="bad-unit",
        ),
        pytest.param("", "latency target '': empty", id="blank"),
        pytest.param(" ; ", "latency target ' ; ': empty", id="only-separators"),
        pytest.param(
            "p99<1s; itl:p95<fast",
            "latency target 'itl:p95<fast': limit 'fast' is not a number",
            id="second-part",
        ),
        pytest.param("p99>1s", "latency target 'p99>1s': a target is an upper bound", id="gt"),
        pytest.param("ttft:<1s", "latency target 'ttft:<1s': missing the percentile", id="stat"),
        pytest.param("p99<0s", "latency target 'p99<0s': limit '0s' must be above zero", id="0"),
        pytest.param(
            "p99<1s, ttft:p99<2s", "latency target 'ttft:p99<2s': TTFT p99 is given twice", id="2x"
        ),
    ],
)
def test_parse_invalid(text: str, message: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_latency_target(text)
    assert str(caught.value).startswith(message)


def _metrics(**series: dict[str, float]) -> Metrics:
    return Metrics.model_validate(series)


@pytest.mark.parametrize(
    ("target", "metrics", "verdict", "reason"),
    [
        pytest.param("p99<1.5s", _metrics(ttft_ms={"p99": 1200}), Verdict.MET, None, id="met"),
        pytest.param(
            "p99<1.5s", _metrics(ttft_ms={"p99": 1500}), Verdict.MET, None, id="limit-is-met"
        ),
        pytest.param(
            "p99<1.5s",
            _metrics(ttft_ms={"p99": 2310}),
            Verdict.MISSED,
            "TTFT p99 2.31 s > 1.5 s",
            id="missed-s",
        ),
        pytest.param(
            "itl:p95<50ms",
            _metrics(itl_ms={"p95": 62.44}),
            Verdict.MISSED,
            "ITL p95 62.4 ms > 50 ms",
            id="missed-ms",
        ),
        pytest.param(
            "p99<1.5s; itl:p95<50ms",
            _metrics(ttft_ms={"p99": 900}),
            Verdict.MISSING,
            "no ITL p95 in this result",
            id="missing",
        ),
        pytest.param(
            "p99<1.5s; itl:p95<50ms",
            _metrics(ttft_ms={"p99": 1800}),
            Verdict.MISSED,
            "TTFT p99 1.8 s > 1.5 s",
            id="missed-beats-missing",
        ),
        pytest.param(
            "p99<1s; e2e:p90<20s",
            _metrics(ttft_ms={"p99": 1100}, e2e_ms={"p90": 25000}),
            Verdict.MISSED,
            "TTFT p99 1.1 s > 1 s; E2E p90 25 s > 20 s",
            id="two-misses",
        ),
    ],
)
def test_judge(target: str, metrics: Metrics, verdict: Verdict, reason: str | None) -> None:
    judgement = parse_latency_target(target).judge(metrics)
    assert (judgement.verdict, judgement.reason) == (verdict, reason)
    assert judgement.met == (verdict is Verdict.MET)


def test_worst_ratio_is_the_tightest_objective() -> None:
    target = LatencyTarget(
        slos=(
            Slo(metric="ttft", stat="p99", max_ms=1000),
            Slo(metric="tpot", stat="p50", max_ms=50),
        )
    )
    judgement = target.judge(_metrics(ttft_ms={"p99": 500}, tpot_ms={"p50": 75}))
    assert judgement.worst_ratio == pytest.approx(1.5)
