"""Pure logic: the optimizer's goals, read from a run's metrics, and whether a run met the
stage's latency target.

- throughput: goodput per GPU — requests meeting every objective of the latency target per
  second, divided by every GPU of the deployment (prefill included) — at the highest rate of
  the stage's traffic the deployment holds the target at (capacity.py finds it);
- cost: $/M output tokens at that rate;
- latency: TTFT p99 at the traffic's own rate (its arrivals as recorded).

Goodput and output tok/s "at the rate" are taken over the run's arrivals (`Served`): the
measured requests' arrival rate times the share of them meeting every objective (times their
mean output). A run that holds keeps pace — its answers come at its arrivals' rate — so
this is the goodput of the steady state; a window that ran to the last answer would count
the final requests' latency against a short run's rate, and so favour slower rates.
"""

from __future__ import annotations

from typing import Literal

from reconciler.catalog.cost import usd_per_m_output
from reconciler.catalog.latency import LatencyTarget, Verdict
from reconciler.spec.base import Spec
from reconciler.spec.result import Metrics

Goal = Literal["throughput", "latency", "cost"]
GOALS: tuple[Goal, ...] = ("throughput", "latency", "cost")

# What each goal reads, in words for tables and docs.
GOAL_METRIC: dict[Goal, str] = {
    "throughput": "goodput/GPU (requests meeting the target per second per GPU, at capacity)",
    "latency": "TTFT p99 (ms) at the traffic's own rate",
    "cost": "$/M output tokens at capacity",
}


def higher_is_better(goal: Goal) -> bool:
    return goal == "throughput"


def searches_capacity(goal: Goal) -> bool:
    """Whether the goal is read at the highest rate that holds the target (else at the
    traffic's own rate)."""
    return goal != "latency"


class Served(Spec):
    """What a run served at its arrival rate (module docstring)."""

    rate: float  # measured requests' arrivals per second (first to last send)
    goodput_rps: float  # rate × the share of measured requests meeting every objective
    output_tok_s: float  # rate × the measured requests' mean output tokens (failed: none)


def served(rate: float, measured: int, good: int, output_tokens: int) -> Served | None:
    """`measured` requests arriving at `rate`/s, `good` of them meeting every objective,
    `output_tokens` in their answers; None when nothing was measured."""
    if measured <= 0 or rate <= 0:
        return None
    return Served(
        rate=round(rate, 3),
        goodput_rps=round(rate * good / measured, 4),
        output_tok_s=round(rate * output_tokens / measured, 3),
    )


def goal_value(
    goal: Goal, metrics: Metrics, gpus: int, gpu_hour: float | None, at: Served | None
) -> float | None:
    """The figure the goal ranks by; None when the run lacks it (or, for cost, no price)."""
    if goal == "latency":
        return metrics.ttft_ms.p99
    if at is None or gpus <= 0:
        return None
    if goal == "throughput":
        return round(at.goodput_rps / gpus, 4)
    if gpu_hour is None or not at.output_tok_s:
        return None
    return usd_per_m_output(gpus, gpu_hour, at.output_tok_s)


def target_miss(target: LatencyTarget | None, metrics: Metrics) -> str | None:
    """Why the metrics miss the latency target; None when they meet it (or there is none)."""
    if target is None:
        return None
    judgement = target.judge(metrics)
    if judgement.verdict is Verdict.MET:
        return None
    return judgement.reason or str(judgement.verdict)
