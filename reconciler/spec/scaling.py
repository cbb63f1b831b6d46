"""Models: elastic stages — the replica bounds a stage (or its release) gives instead of a fixed
count, and the scaling policies (policies/scaling.yaml) that say how the bot moves the count
inside them. Git owns the bounds and the policy; the bot owns the count between them."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field, PositiveInt, model_validator

from reconciler.spec.base import Duration, Slug, Spec
from reconciler.spec.recipe import AggregatedTopology, DisaggregatedTopology


class ReplicaBounds(Spec):
    """`replicas: {min: 1, max: 8}`: the bot keeps between min and max replicas of the
    deployment on each of the stage's fleets, as its scaling policy says. `pool: stage`: the
    bounds are the stage's, one count over all its fleets, each of which keeps one replica
    (its endpoint answers) while the others go where a GPU-hour costs least."""

    min: PositiveInt
    max: PositiveInt
    policy: Slug = "default"  # a policy of policies/scaling.yaml
    pool: Literal["fleet", "stage"] = "fleet"

    @model_validator(mode="after")
    def _ordered(self) -> ReplicaBounds:
        if self.min > self.max:
            raise ValueError(f"min {self.min} is more than max {self.max}")
        return self

    def clamp(self, count: int) -> int:
        return max(self.min, min(self.max, count))

    def describe(self, count: int, pool: int | None = None) -> str:
        """'4 (1–8)': the count the bot chose, and the bounds git gives; one fleet of a stage's
        pool of `pool` replicas: '2 of the stage's 5 (3–8)'."""
        if pool is not None:
            return f"{count} of the stage's {pool} ({self.min}–{self.max})"
        return f"{count} ({self.min}–{self.max})"

    def on_fleet(self, fleets: int) -> ReplicaBounds:
        """What one of the stage's `fleets` fleets keeps: these bounds, or, in a stage's
        pool, at least one replica and at most what the others' one each leaves."""
        if self.pool == "fleet":
            return self
        return ReplicaBounds(min=1, max=max(1, self.max - fleets + 1), policy=self.policy)


class ScaleUp(Spec):
    # How long a signal must ask for more before replicas are added (0: at once).
    delay: Duration = 0.0
    step: PositiveInt = 4  # at most this many replicas added by one decision


class ScaleDown(Spec):
    # How long every signal must allow fewer replicas, and how long after the last change,
    # before one is removed: the hysteresis that keeps the count from flapping.
    delay: Duration = 300.0
    step: PositiveInt = 1  # at most this many replicas removed by one decision
    # In-flight requests of a replica leaving its router get this long to finish.
    drain_grace: Duration = 60.0


class ScalingPolicy(Spec):
    """How the bot chooses a count inside a stage's bounds (docs/scaling.md)."""

    interval: Duration = 15.0  # signals read and a decision made at most this often
    window: Duration = 60.0  # the arrival rate and lengths are averaged over this long
    # Predictive: the arrival rate over the simulator's requests/s per replica at the stage's
    # latency targets, each replica run at this fraction of that capacity.
    predictive: bool = True
    target_utilization: float = Field(default=0.7, gt=0, le=1)
    # The latency (p99) a replica's capacity is judged at when the stage has no latency alarm;
    # the stage's ttft, itl and tpot alarms replace them.
    ttft: Duration = 2.0
    itl: Duration = 0.1
    # Reactive: more replicas while requests wait (per replica) or the KV cache is this full,
    # or while an alarm of the stage is over its threshold.
    max_waiting_per_replica: float = Field(default=2.0, ge=0)
    max_kv_usage: float = Field(default=0.9, gt=0, le=1)
    alarms: bool = True
    up: ScaleUp = ScaleUp()
    down: ScaleDown = ScaleDown()


DEFAULT_POLICY = "default"


class ScalingFile(Spec):
    scaling: dict[Slug, ScalingPolicy]


def bounded_topology(
    topology: AggregatedTopology | DisaggregatedTopology, bounds: ReplicaBounds | None
) -> AggregatedTopology | DisaggregatedTopology:
    """The topology at the bounds' minimum: what must fit a fleet (more is pending capacity,
    shown and never counted)."""
    if bounds is None or not isinstance(topology, AggregatedTopology):
        return topology
    return topology.model_copy(update={"replicas": bounds.min})


def with_replicas(
    topology: AggregatedTopology | DisaggregatedTopology, count: int
) -> AggregatedTopology | DisaggregatedTopology:
    if not isinstance(topology, AggregatedTopology):
        return topology
    return topology.model_copy(update={"replicas": count})


def suggested_bounds(
    per_replica_rps: float | None, peak: float | None, trough: float | None
) -> dict[str, int] | None:
    """The bounds a traffic between `trough` and `peak` requests/s needs at `per_replica_rps`
    each: max holds the peak, min the trough (at least 1); None without a peak or a capacity."""
    if per_replica_rps is None or per_replica_rps <= 0 or peak is None:
        return None
    most = max(1, math.ceil(peak / per_replica_rps - 1e-9))
    least = max(1, math.ceil((trough or 0.0) / per_replica_rps - 1e-9))
    return {"min": min(least, most), "max": most}
