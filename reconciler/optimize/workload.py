"""Models and pure logic: what every run of a study sends and how a run is judged.

- The traffic is the stage's recorded shape (`denv traffic record`, kept at
  `releases/<release>/traffic/<stage>.jsonl`) or a given file; its requests (lengths and
  shared prefix blocks) are replayed in closed loop at the study's concurrency, cycled when
  the file has fewer than a run needs.
- The latency target is the stage's latency alarms (policies/alarms.yaml) read as objectives:
  `ttft-p99-1.5s` becomes TTFT p99 < 1.5 s. Alarms on other metrics (errors, KV usage) are
  not latency objectives; a run with any failed request misses the target instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from reconciler.bench.traffic import TraceLine
from reconciler.catalog.latency import METRICS, STATS, LatencyTarget, Slo
from reconciler.errors import DenvError
from reconciler.optimize.goal import Goal, target_miss
from reconciler.spec.base import Spec
from reconciler.spec.policy import Alarm
from reconciler.spec.release import Stage
from reconciler.spec.result import Metrics

# The goal's figure as a table header and the PR's metric name.
GOAL_LABEL: dict[Goal, str] = {
    "throughput": "tok/s/GPU",
    "latency": "TTFT p99 (ms)",
    "cost": "$/M output",
}


def recorded_shape_path(release: str, stage: str) -> str:
    """Where a stage's recorded traffic shape lives in the repository (no prompt text)."""
    return f"releases/{release}/traffic/{stage}.jsonl"


class Workload(Spec):
    """What every run of a study sends and how it is judged."""

    lines: list[TraceLine]
    concurrency: int
    goal: Goal
    target: LatencyTarget | None = None
    gpu_hour: float | None = None  # the fleet's price, for the cost goal
    timeout_s: float = 120.0  # no chunk for this long: the request failed


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


def run_miss(target: LatencyTarget | None, metrics: Metrics) -> str | None:
    """Why a run misses the target (a failed request, a latency objective), or None."""
    if metrics.errors:
        return f"{metrics.errors} of {(metrics.requests or 0) + metrics.errors} requests failed"
    return target_miss(target, metrics)


def run_lines(lines: Sequence[TraceLine], concurrency: int, requests: int) -> list[TraceLine]:
    """`requests` lines of the traffic (at least three a client, so the warm-up of one a
    client leaves figures to take), cycling through the file when it has fewer."""
    if not lines:
        raise DenvError("the traffic has no request to replay")
    wanted = max(requests, 3 * concurrency)
    return [lines[i % len(lines)] for i in range(wanted)]
