"""Models: policies (policies/alarms.yaml, gates.yaml, optimizer.yaml)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, PositiveInt, model_validator

from reconciler.spec.base import Duration, Slug, Spec, parse_duration

LATENCY_METRICS = ("ttft", "tpot", "itl", "e2e", "queue_time")
FRACTION_METRICS = ("error_rate", "kv_usage")


def _parse_fraction(value: Any) -> float:
    if isinstance(value, str) and value.strip().endswith("%"):
        return float(value.strip()[:-1]) / 100
    return float(value)


class Alarm(Spec):
    """A threshold on an engine metric over a window, e.g. TTFT p99 ≤ 1.5 s over 5 m.
    `max` is in seconds for latencies (units accepted), a fraction for rates ('1%' accepted)."""

    metric: Literal["ttft", "tpot", "itl", "e2e", "queue_time", "error_rate", "queue", "kv_usage"]
    stat: Literal["p50", "p90", "p95", "p99", "mean", "value"] = "value"
    max: float
    window: Duration = 300.0
    min_requests: PositiveInt = 50

    @model_validator(mode="before")
    @classmethod
    def _units(cls, data: Any) -> Any:
        if isinstance(data, dict) and "max" in data:
            metric, limit = data.get("metric"), data["max"]
            if metric in LATENCY_METRICS:
                data = {**data, "max": parse_duration(limit)}
            elif metric in FRACTION_METRICS:
                data = {**data, "max": _parse_fraction(limit)}
        return data

    @model_validator(mode="after")
    def _stat_fits_metric(self) -> Alarm:
        if self.metric in LATENCY_METRICS and self.stat == "value":
            raise ValueError(f"a latency alarm needs a stat (p50 … p99 or mean), not {self.stat}")
        return self


class PrometheusSource(Spec):
    """A Prometheus server that scrapes the engines (with their default `instance` label,
    host:port): alarms query it instead of scraping each engine's /metrics."""

    url: str = Field(pattern=r"^https?://")


class AlarmsFile(Spec):
    alarms: dict[Slug, Alarm]
    prometheus: PrometheusSource | None = None


class ParityPolicy(Spec):
    """How answers of a candidate are compared with the reference's (docs/parity.md):
    strict needs every greedy token equal; tolerant also passes an answer whose first
    differing token is, on each side, among the other side's top_k logprobs."""

    mode: Literal["strict", "tolerant"] = "tolerant"
    top_k: int = Field(default=5, ge=1, le=20)  # OpenAI-compatible servers give at most 20
    suite: Slug = "default"  # policies/parity/<suite>.jsonl


class Gates(Spec):
    require_pinned_weights: bool = True
    default_approvals: int = Field(default=1, ge=0)
    approvers: list[str] = []  # GitHub users or org/team; empty: anyone with write permission
    min_ready_fraction: float = Field(default=1.0, gt=0, le=1)
    # A roll without free GPUs for a surge replica takes one replica out at a time; 0 forbids it.
    max_unavailable: int = Field(default=1, ge=0, le=1)
    rollback_on_alarm: Literal["bake", "always"] = "bake"
    parity: ParityPolicy = ParityPolicy()


class GatesFile(Spec):
    gates: Gates


class OptimizerRules(Spec):
    max_trials: PositiveInt = 40
    allow_quantization: list[str] = []  # formats the optimizer may try; none by default
    allow_engine_change: bool = True
    parity: Literal["strict", "tolerant"] = "tolerant"
    parity_top_k: PositiveInt = 5
    repeats: PositiveInt = 3
    min_gain: float = Field(default=0.03, ge=0)
    drift_threshold: float = Field(default=0.2, ge=0)


class OptimizerFile(Spec):
    optimizer: OptimizerRules


class Policies(Spec):
    alarms: dict[str, Alarm] = {}
    prometheus: PrometheusSource | None = None  # None: alarms scrape the engines themselves
    gates: Gates = Gates()
    optimizer: OptimizerRules = OptimizerRules()
