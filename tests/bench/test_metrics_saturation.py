"""saturation.py: growing queueing is flagged; steady load, short runs and closed loop are not."""

from __future__ import annotations

import pytest

from reconciler.bench.records import RequestRecord
from reconciler.bench.saturation import saturation


def open_loop(
    count: int, gap_s: float, ttft_s: list[float], *, closed: bool = False
) -> list[RequestRecord]:
    """Requests sent every gap_s with the given TTFTs; each answer lasts 50 ms more."""
    out = []
    for i in range(count):
        sent = i * gap_s
        first = sent + ttft_s[i]
        out.append(
            RequestRecord(
                index=i,
                scheduled_s=None if closed else sent,
                sent_s=sent,
                chunks_s=(first, first + 0.05),
                done_s=first + 0.05,
                input_length=100,
                output_length=2,
            )
        )
    return out


def test_a_queue_that_grows_is_flagged() -> None:
    # arrivals every 50 ms (20/s), served every 100 ms (10/s): each waits 50 ms more
    records = open_loop(40, 0.05, [0.02 + 0.05 * i for i in range(40)])
    verdict = saturation(records)
    assert verdict.saturated
    assert verdict.arrival_rps == pytest.approx(20.0)
    assert verdict.answer_rps == pytest.approx(10.0, rel=0.01)
    assert verdict.reason is not None and "fell behind arrivals" in verdict.reason


def test_steady_load_is_not_flagged() -> None:
    jitter = [0.02 + 0.01 * (i % 3) for i in range(40)]
    verdict = saturation(open_loop(40, 0.05, jitter))
    assert not verdict.saturated and verdict.reason is None
    assert verdict.answer_rps == pytest.approx(verdict.arrival_rps, rel=0.05)


def test_rising_ttft_alone_is_not_enough() -> None:
    # TTFT triples, but answers keep pace with arrivals: a slow drift, not an unbounded queue
    drift = [0.01 + 0.0005 * i for i in range(40)]
    assert not saturation(open_loop(40, 0.05, drift)).saturated


def test_closed_loop_is_never_flagged() -> None:
    records = open_loop(40, 0.05, [0.02 + 0.05 * i for i in range(40)], closed=True)
    assert not saturation(records).saturated


def test_too_few_answers_give_no_verdict() -> None:
    verdict = saturation(open_loop(5, 0.05, [0.02 + 0.05 * i for i in range(5)]))
    assert not verdict.saturated and verdict.reason == "5 answers: too few to judge saturation"
