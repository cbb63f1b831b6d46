"""Models and pure logic: what every run of a study sends and how a run is judged.

- The traffic is the stage's recorded shape (`denv traffic record`, kept at
  `releases/<release>/traffic/<stage>.jsonl`) or a given file; its requests (lengths, shared
  prefix blocks and arrival times) are replayed open loop with their own arrival pattern,
  time-scaled: at speed 2 every gap between arrivals is halved. A run lasts `run_s` seconds
  of arrivals at its speed (at least `requests` requests, at most MAX_RUN_REQUESTS), cycling
  through the file (each cycle starting one mean gap after the last) when it has fewer: long
  enough for a queue to build where the deployment cannot keep up.
- The latency target is the stage's latency alarms (policies/alarms.yaml) read as objectives:
  `ttft-p99-1.5s` becomes TTFT p99 < 1.5 s. Alarms on other metrics (errors, KV usage) are
  not latency objectives; a run with any failed request misses the target instead, and so
  does one whose answers fall behind its arrivals (a queue that grows for as long as the
  traffic lasts: a longer run would miss the latency objectives).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from reconciler.bench.levels import mean_rate, send_times
from reconciler.bench.saturation import BEHIND
from reconciler.bench.traffic import TraceLine
from reconciler.catalog.latency import METRICS, STATS, LatencyTarget, Slo
from reconciler.errors import DenvError
from reconciler.optimize.goal import Goal, target_miss
from reconciler.spec.base import Spec
from reconciler.spec.policy import Alarm
from reconciler.spec.release import Stage
from reconciler.spec.result import Metrics

MIN_REQUESTS = 24  # a run's least: its warm-up (a tenth) leaves figures to take
MAX_RUN_REQUESTS = 2000

# The goal's figure as a table header and the PR's metric name.
GOAL_LABEL: dict[Goal, str] = {
    "throughput": "goodput/GPU (req/s)",
    "latency": "TTFT p99 (ms)",
    "cost": "$/M output",
}


def recorded_shape_path(release: str, stage: str) -> str:
    """Where a stage's recorded traffic shape lives in the repository (no prompt text)."""
    return f"releases/{release}/traffic/{stage}.jsonl"


class Workload(Spec):
    """What every run of a study sends and how it is judged."""

    lines: list[TraceLine]  # the traffic, in arrival order, with arrival times
    goal: Goal
    target: LatencyTarget | None = None
    gpu_hour: float | None = None  # the fleet's price, for the cost goal
    timeout_s: float = 120.0  # no chunk for this long: the request failed
    requests: int = MIN_REQUESTS  # a run's least
    run_s: float = 10.0  # seconds of arrivals a run lasts
    max_requests: int = MAX_RUN_REQUESTS  # a run's most

    @property
    def recorded_rps(self) -> float:
        """The traffic's own mean arrival rate (requests/s): speed 1."""
        return mean_rate(send_times(self.lines)) or 0.0

    def rate(self, speed: float) -> float:
        return round(self.recorded_rps * speed, 3)

    def run(self, speed: float) -> tuple[list[TraceLine], list[float]]:
        """A run's lines at `speed` and each one's send time (seconds from the start)."""
        wanted = math.ceil(self.recorded_rps * speed * self.run_s)
        lines = run_lines(self.lines, min(max(wanted, self.requests), self.max_requests))
        return lines, send_times(lines, time_scale=1.0 / speed)


def stage_target(stage: Stage, alarms: Mapping[str, Alarm]) -> LatencyTarget | None:
    """The stage's latency alarms as a target; None when it has none."""
    slos: list[Slo] = []
    for name in stage.alarms:
        alarm = alarms.get(name)
        if alarm is None or alarm.metric not in METRICS or alarm.stat not in STATS:
            continue
        slo = Slo(metric=METRICS[alarm.metric], stat=STATS[alarm.stat], max_ms=alarm.max * 1000)
        if not any((s.metric, s.stat) == (slo.metric, slo.stat) for s in slos):
            slos.append(slo)
    return LatencyTarget(slos=tuple(slos)) if slos else None


def run_miss(
    target: LatencyTarget | None,
    metrics: Metrics,
    arrival_rps: float | None = None,
    answer_rps: float | None = None,
) -> str | None:
    """Why a run misses the target (a failed request, answers falling behind arrivals, a
    latency objective), or None. `arrival_rps`/`answer_rps`: measured sends and answers per
    second (first to last), as bench/saturation.py takes them."""
    if metrics.errors:
        return f"{metrics.errors} of {(metrics.requests or 0) + metrics.errors} requests failed"
    if arrival_rps and answer_rps is not None and answer_rps < BEHIND * arrival_rps:
        return (
            f"answers ({answer_rps:.3g}/s) fell behind arrivals ({arrival_rps:.3g}/s): "
            "a queue builds"
        )
    return target_miss(target, metrics)


def run_lines(lines: Sequence[TraceLine], requests: int) -> list[TraceLine]:
    """`requests` lines of the traffic (at least MIN_REQUESTS) in arrival order, cycling
    through the file when it has fewer: each cycle starts one mean gap after the last line
    of the one before. DenvError when the traffic has no arrival pattern to replay."""
    if not lines:
        raise DenvError("the traffic has no request to replay")
    ordered = sorted(lines, key=lambda line: line.timestamp)
    first, last = ordered[0].timestamp, ordered[-1].timestamp
    if last <= first:
        raise DenvError(
            "every request of the traffic arrives at once: the optimizer replays the traffic's "
            "own arrival pattern, so it needs arrival times (`denv traffic record` keeps them)"
        )
    cycle = (last - first) * len(ordered) / (len(ordered) - 1)  # the span and one mean gap
    wanted = max(requests, MIN_REQUESTS)
    return [
        ordered[i % len(ordered)].model_copy(
            update={"timestamp": ordered[i % len(ordered)].timestamp + (i // len(ordered)) * cycle}
        )
        for i in range(wanted)
    ]
