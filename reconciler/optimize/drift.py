"""Pure logic: how far a traffic shape has moved from the one a study optimized for.

The distance is the largest of five components, each a number where 0 is "the same":

- the input length's p50 and p90, and the output length's p50 and p90, as |ln(now / then)|
  (0.2 is a change of about 22% either way);
- prefix reuse (the share of prompt blocks an earlier request already sent), as the absolute
  difference of the two shares (0.2 is twenty points).

Lengths and prefix reuse decide which recipe wins (batch sizes, chunked prefill, prefix
caching, KV size); the arrival rate does not enter, since trials run at a fixed concurrency.
The optimizer re-measures when the distance exceeds `rules.drift_threshold`.
"""

from __future__ import annotations

import math

from reconciler.bench.traffic_stats import TraceStats
from reconciler.spec.base import Spec


class Drift(Spec):
    distance: float
    largest: str  # the component that sets it, e.g. "output p50"
    components: dict[str, float]

    def exceeds(self, threshold: float) -> bool:
        return self.distance > threshold

    def describe(self) -> str:
        return f"traffic drifted {self.distance:.2f} ({self.largest})"


def _log_ratio(now: float, then: float) -> float:
    # lengths are at least one token; guard against a zero all the same
    return abs(math.log(max(now, 1.0) / max(then, 1.0)))


def drift(then: TraceStats, now: TraceStats) -> Drift:
    """The distance from the shape optimized for (`then`) to the shape seen now."""
    components = {
        "input p50": _log_ratio(now.input.p50, then.input.p50),
        "input p90": _log_ratio(now.input.p90, then.input.p90),
        "output p50": _log_ratio(now.output.p50, then.output.p50),
        "output p90": _log_ratio(now.output.p90, then.output.p90),
        "prefix reuse": abs(now.prefix_reuse - then.prefix_reuse),
    }
    rounded = {name: round(value, 4) for name, value in components.items()}
    largest = max(rounded, key=lambda name: rounded[name])
    return Drift(distance=rounded[largest], largest=largest, components=rounded)
