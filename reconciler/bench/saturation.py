"""Pure logic: is a load level past what the server sustains — queueing that grows without
bound — judged from its measured requests.

Open loop, a server that answers more slowly than requests arrive builds a queue that grows
for as long as the run lasts: each request waits longer than the one before, so TTFT climbs
through the run, and answers come out at the server's pace, behind the arrivals. A level is
flagged when both show:

- TTFT grows: the median TTFT of the last quarter of requests (in send order) is more than
  `GROWTH` times that of the first quarter;
- answers fall behind: answers per second (first to last answer) are under `BEHIND` times
  requests sent per second (first to last send).

Either alone happens by chance in short or uneven runs (one long answer at the end stretches
the answer span); together they do not. Closed loop cannot saturate in this sense: a client
sends only when its answer is back, so the queue is bounded by the concurrency.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from pydantic import NonNegativeFloat

from reconciler.bench.records import RequestRecord
from reconciler.spec.base import Spec

GROWTH = 2.0
BEHIND = 0.9
MIN_REQUESTS = 20  # fewer measured answers than this: no verdict


class Saturation(Spec):
    saturated: bool
    reason: str | None = None  # why it is flagged, or why no verdict could be given
    arrival_rps: NonNegativeFloat | None = None
    scheduled_rps: NonNegativeFloat | None = None  # open loop: the rate the trace asked for
    answer_rps: NonNegativeFloat | None = None
    ttft_first_quarter_ms: NonNegativeFloat | None = None
    ttft_last_quarter_ms: NonNegativeFloat | None = None


def _rate(times: Sequence[float]) -> float | None:
    span = max(times) - min(times)
    return (len(times) - 1) / span if span > 0 else None


def saturation(measured: Sequence[RequestRecord]) -> Saturation:
    """The verdict over the measured requests of one level (warm-up already left out)."""
    answered = sorted((r for r in measured if r.ok and r.chunks_s), key=lambda r: r.sent_s)
    if len(answered) < MIN_REQUESTS:
        return Saturation(
            saturated=False, reason=f"{len(answered)} answers: too few to judge saturation"
        )
    quarter = len(answered) // 4
    first = statistics.median(r.chunks_s[0] - r.sent_s for r in answered[:quarter])
    last = statistics.median(r.chunks_s[0] - r.sent_s for r in answered[-quarter:])
    arrival = _rate([r.sent_s for r in measured])
    answers = _rate([r.done_s for r in answered])
    scheduled = [r.scheduled_s for r in measured if r.scheduled_s is not None]
    asked = _rate(scheduled) if len(scheduled) > 1 else None
    figures = Saturation(
        saturated=False,
        arrival_rps=round(arrival, 3) if arrival is not None else None,
        scheduled_rps=round(asked, 3) if asked is not None else None,
        answer_rps=round(answers, 3) if answers is not None else None,
        ttft_first_quarter_ms=round(first * 1000, 3),
        ttft_last_quarter_ms=round(last * 1000, 3),
    )
    closed = all(r.scheduled_s is None for r in measured)
    if closed or arrival is None or answers is None:
        return figures
    if last > GROWTH * first and answers < BEHIND * arrival:
        reason = (
            f"queueing grows: TTFT rose from {first:.3g} s to {last:.3g} s over the run "
            f"while answers ({answers:.3g}/s) fell behind arrivals ({arrival:.3g}/s)"
        )
        return figures.model_copy(update={"saturated": True, "reason": reason})
    return figures
