"""Pure logic: the optimizer's goals — tok/s/GPU (every GPU), TTFT p99, or $/M output tokens —
read from a run's metrics, and whether a run met the stage's latency target."""

from __future__ import annotations

from typing import Literal

from reconciler.catalog.cost import usd_per_m_output
from reconciler.catalog.latency import LatencyTarget, Verdict
from reconciler.spec.result import Metrics

Goal = Literal["throughput", "latency", "cost"]
GOALS: tuple[Goal, ...] = ("throughput", "latency", "cost")

# What each goal reads, in words for tables and docs.
GOAL_METRIC: dict[Goal, str] = {
    "throughput": "output tok/s/GPU (every GPU, prefill included)",
    "latency": "TTFT p99 (ms)",
    "cost": "$/M output tokens",
}


def higher_is_better(goal: Goal) -> bool:
    return goal == "throughput"


def goal_value(goal: Goal, metrics: Metrics, gpus: int, gpu_hour: float | None) -> float | None:
    """The figure the goal ranks by; None when the metrics lack it (or, for cost, no price)."""
    if goal == "throughput":
        return metrics.output_tok_s_per_gpu
    if goal == "latency":
        return metrics.ttft_ms.p99
    if gpu_hour is None or not metrics.output_tok_s or gpus <= 0:
        return None
    return usd_per_m_output(gpus, gpu_hour, metrics.output_tok_s)


def target_miss(target: LatencyTarget | None, metrics: Metrics) -> str | None:
    """Why the metrics miss the latency target; None when they meet it (or there is none)."""
    if target is None:
        return None
    judgement = target.judge(metrics)
    if judgement.verdict is Verdict.MET:
        return None
    return judgement.reason or str(judgement.verdict)
