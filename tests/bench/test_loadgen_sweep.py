"""sweep.py: schedules of open-loop levels, what each level sends, and clear refusals."""

from __future__ import annotations

import pytest

from reconciler.bench.levels import level_lines, mean_rate, rate_scale, send_times
from reconciler.bench.sweep import run_sweep
from reconciler.bench.traffic import TraceLine
from reconciler.errors import DenvError, UsageError
from tests.bench.scripted import scripted_server
from tests.engines.sim.sims import free_port


def trace(stamps_ms: list[float]) -> list[TraceLine]:
    return [
        TraceLine(timestamp=t, input_length=10, output_length=2, hash_ids=[i])
        for i, t in enumerate(stamps_ms)
    ]


def test_send_times_keep_the_traces_gaps_scaled() -> None:
    lines = trace([1000, 1500, 3000, 3100])
    assert send_times(lines) == [0.0, 0.5, 2.0, 2.1]
    assert send_times(lines, time_scale=0.5) == [0.0, 0.25, 1.0, 1.05]
    assert mean_rate(send_times(lines)) == pytest.approx(3 / 2.1)


def test_a_rate_rescales_the_trace_to_that_mean() -> None:
    lines = trace([0, 100, 400, 1000])  # 3 gaps in 1 s: 3 requests/s
    scale = rate_scale(lines, 30.0)
    assert scale == pytest.approx(0.1)
    assert mean_rate(send_times(lines, time_scale=scale)) == pytest.approx(30.0)


def test_a_trace_sent_all_at_once_has_no_rate() -> None:
    with pytest.raises(UsageError, match="arrives at once"):
        rate_scale(trace([0, 0, 0]), 5.0)


def test_closed_loop_levels_send_eleven_a_client_at_least_fifty() -> None:
    lines = trace([0] * 400)
    assert len(level_lines(lines, "concurrency", 1, None)) == 50
    assert len(level_lines(lines, "concurrency", 32, None)) == 352
    assert len(level_lines(lines, "concurrency", 64, None)) == 400  # no more than the trace
    assert len(level_lines(lines, "concurrency", 8, 20)) == 20
    assert len(level_lines(lines, "rate", 8.0, None)) == 400


def test_refusals_are_clear() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(DenvError, match="cannot reach the endpoint"):
        run_sweep(url, "m", trace([0, 10]), [1], gpus=1)
    with pytest.raises(UsageError, match="levels must be positive"):
        run_sweep(url, "m", trace([0, 10]), [0], gpus=1, prompt="token_ids")
    with pytest.raises(UsageError, match="no requests"):
        run_sweep(url, "m", [], [1], gpus=1, prompt="token_ids")


def test_progress_counts_every_request_of_every_level() -> None:
    seen: list[tuple[str, int, int]] = []
    with scripted_server() as url:
        levels = run_sweep(
            url,
            "m",
            trace([i * 5 for i in range(12)]),
            [2, 4],
            gpus=1,
            requests=12,
            progress=lambda label, done, total: seen.append((label, done, total)),
        )
    assert [lv.load.concurrency for lv in levels] == [2, 4]
    assert [s for s in seen if s[1] in (0, 12)] == [
        ("concurrency 2", 0, 12),
        ("concurrency 2", 12, 12),
        ("concurrency 4", 0, 12),
        ("concurrency 4", 12, 12),
    ]
    assert len(seen) == 26
