"""cli/bench_view.py: a sweep's levels' table (its progress: test_progress.py)."""

from __future__ import annotations

import pytest

from reconciler.bench.metrics import LevelMetrics
from reconciler.bench.saturation import Saturation
from reconciler.cli.bench_view import print_levels
from reconciler.spec.result import Load, Metrics, Percentiles


def level(
    load: Load, saturated: bool = False, errors: dict[str, int] | None = None
) -> LevelMetrics:
    errors = errors or {}
    return LevelMetrics(
        load=load,
        metrics=Metrics(
            ttft_ms=Percentiles(p50=41.5, p99=120.25),
            tpot_ms=Percentiles(p50=9.87),
            itl_ms=Percentiles(p99=30.5),
            e2e_ms=Percentiles(p99=2000.0),
            output_tok_s=5123.4,
            output_tok_s_per_gpu=640.4,
            goodput_rps=12.5,
            requests=88,
            errors=sum(errors.values()),
            errors_by_kind=errors,
        ),
        sent=96,
        warmup=8,
        window_s=12.0,
        output_tokens=22000,
        saturation=Saturation(
            saturated=saturated, reason="queueing grows: …" if saturated else None
        ),
    )


def test_levels_table(capsys: pytest.CaptureFixture[str]) -> None:
    print_levels(
        [level(Load(concurrency=8)), level(Load(rate=40.0), True, {"http_503": 3})], "sweep"
    )
    out = capsys.readouterr().out
    assert "TTFT-P99" in out and "SATURATED" in out
    assert "c8" in out and "40/s" in out
    assert "3 (http_503 3)" in out
    assert "88 (+8 warm-up)" in out and "left out of every figure" in out
    assert "40/s: queueing grows: …" in out
