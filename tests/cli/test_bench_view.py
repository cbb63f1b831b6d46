"""cli/bench_view.py: the sweep's progress bars and its levels' table."""

from __future__ import annotations

import pytest

from reconciler.bench.metrics import LevelMetrics
from reconciler.bench.saturation import Saturation
from reconciler.cli.bench_view import print_levels, sweep_progress
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
    assert "40/s: queueing grows: …" in out


def test_progress_shows_one_bar_per_level(capsys: pytest.CaptureFixture[str]) -> None:
    with sweep_progress() as progress:
        for done in range(4):
            progress("concurrency 1", done, 3)
        progress("concurrency 8", 0, 10)
        progress("concurrency 8", 10, 10)
    out = capsys.readouterr().out
    assert "concurrency 1" in out and "3/3" in out
    assert "concurrency 8" in out and "10/10" in out
