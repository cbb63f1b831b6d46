"""Pure logic: the levels of a sweep — which lines each level sends, when (the trace's own
arrival times, rescaled), and its label. The sweep that sends them is bench/sweep.py."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from reconciler.bench.traffic import TraceLine
from reconciler.engines.model.predict import default_requests
from reconciler.errors import UsageError

Mode = Literal["concurrency", "rate", "replay"]


def send_times(lines: Sequence[TraceLine], *, time_scale: float = 1.0) -> list[float]:
    """Seconds from the start at which each line is sent: its timestamp less the first one's,
    times `time_scale`."""
    first = lines[0].timestamp if lines else 0.0
    return [(line.timestamp - first) / 1000.0 * time_scale for line in lines]


def mean_rate(times: Sequence[float]) -> float | None:
    span = times[-1] - times[0] if times else 0.0
    return (len(times) - 1) / span if span > 0 else None


def rate_scale(lines: Sequence[TraceLine], rate: float) -> float:
    """The time scale that makes the trace's mean arrival rate `rate` requests/s."""
    recorded = mean_rate(send_times(lines))
    if recorded is None:
        raise UsageError(
            "every request of this traffic arrives at once, so it has no rate to rescale: "
            "use --concurrency, or a trace with arrival times"
        )
    return recorded / rate


def level_lines(
    lines: Sequence[TraceLine], mode: Mode, level: float, requests: int | None
) -> list[TraceLine]:
    """The lines one level sends: `requests` of them, else in closed loop a warm-up of one
    a client and ten a client after it (at least 50), else the whole trace."""
    if requests is None and mode == "concurrency":
        requests = default_requests(int(level), None)
    return list(lines[:requests] if requests is not None else lines)


def level_label(mode: Mode, level: float) -> str:
    if mode == "concurrency":
        return f"concurrency {int(level)}"
    return f"rate {level:g}/s" if mode == "rate" else f"time scale {level:g}"
