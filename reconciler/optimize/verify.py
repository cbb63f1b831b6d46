"""Pure logic: is a candidate better than the current release by more than run-to-run noise?

Both are measured `rules.repeats` times on the same traffic (interleaved: current, candidate,
current, …, so a slow drift of the machine hits both). The gain is the difference of the
means relative to the current mean (for the latency and cost goals, lower is better, so a
gain is a decrease). Its 95% confidence interval is Welch's t interval for the difference of
two means, divided by the current mean; the degrees of freedom are rounded down, which
widens the interval a little. With one run each there is no interval: it is the gain alone.

A candidate is verified when its gain exceeds `rules.min_gain`, the interval's low end is
above zero (better beyond noise), and every run of it met the latency target. Only then does
parity run; a parity failure rejects it whatever the gain. A gain at or below `min_gain` is
a rejection. A gain above it whose interval reaches zero is undecided — noise, not evidence
against the candidate: the verdict is `inconclusive`, and more runs of both sides (up to
`most_runs`) narrow the interval until it decides.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Literal

from reconciler.spec.base import Spec
from reconciler.spec.recipe import Recipe

# Student's t, two-sided 95% (the 0.975 quantile), by degrees of freedom 1..30.
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def t975(df: int) -> float:
    """The 0.975 quantile of Student's t with `df` degrees of freedom (df ≥ 1)."""
    if df <= len(_T975):
        return _T975[max(df, 1) - 1]
    return 2.0 if df <= 60 else 1.98 if df <= 120 else 1.96


class Gain(Spec):
    """A candidate's gain over the current release, as fractions (0.12 = 12% better)."""

    current_mean: float
    candidate_mean: float
    gain: float
    low: float  # 95% interval
    high: float
    runs: int  # per side


def gain_interval(
    current: Sequence[float], candidate: Sequence[float], higher_is_better: bool
) -> Gain:
    """The gain of `candidate` over `current` (goal figures of repeated runs) and its
    interval. ValueError when a side has no run or the current mean is not positive."""
    if not current or not candidate:
        raise ValueError("a gain needs at least one run of each side")
    mean_r, mean_c = statistics.fmean(current), statistics.fmean(candidate)
    if mean_r <= 0:
        raise ValueError(f"the current figure must be positive, got {mean_r}")
    sign = 1.0 if higher_is_better else -1.0
    gain = sign * (mean_c - mean_r) / mean_r
    half = 0.0
    if len(current) >= 2 and len(candidate) >= 2:
        var_r = statistics.variance(current) / len(current)
        var_c = statistics.variance(candidate) / len(candidate)
        se = math.sqrt(var_r + var_c)
        if se > 0:
            df = (var_r + var_c) ** 2 / (
                var_r**2 / (len(current) - 1) + var_c**2 / (len(candidate) - 1)
            )
            half = t975(max(int(df), 1)) * se / mean_r
    return Gain(
        current_mean=mean_r,
        candidate_mean=mean_c,
        gain=gain,
        low=gain - half,
        high=gain + half,
        runs=min(len(current), len(candidate)),
    )


def percent(fraction: float) -> str:
    return f"{fraction * 100:+.1f}%"


Decision = Literal["verified", "inconclusive", "rejected"]


def gain_verdict(gain: Gain, min_gain: float) -> tuple[Decision, str | None]:
    """What the gain says of the candidate, and why when it does not verify it: rejected when
    the gain is not above `min_gain`; inconclusive when it is but its interval reaches zero
    (within noise: more runs may decide); else verified."""
    if gain.gain <= min_gain:
        return "rejected", f"gain {percent(gain.gain)} is not above {percent(min_gain)}"
    if gain.low <= 0:
        return "inconclusive", (
            f"gain {percent(gain.gain)} is within noise "
            f"(95% interval {percent(gain.low)} to {percent(gain.high)})"
        )
    return "verified", None


def most_runs(repeats: int) -> int:
    """The most runs of each side one verification takes while the gain is inconclusive:
    twice `rules.repeats` (the repeats, then one more of each side at a time)."""
    return 2 * repeats


def promising(current: float, candidate: float, higher_is_better: bool, min_gain: float) -> bool:
    """After one trial run: worth repeating? A gain above `min_gain` on the single runs."""
    if current <= 0:
        return candidate > 0 if higher_is_better else False
    sign = 1.0 if higher_is_better else -1.0
    return sign * (candidate - current) / current > min_gain


def answer_levers(recipe: Recipe) -> str:
    """The settings that can change a greedy answer: the engine and its version, the weights'
    quantization, the KV cache's dtype. A candidate sharing them with one that failed parity
    fails it too (in the simulator by construction; on GPUs these are the numerics that
    differ), so it is rejected without a trial. Only failures are reused: a pass never is."""
    settings = recipe.settings
    return (
        f"engine {recipe.engine.name} {recipe.engine.version}, "
        f"quantization {settings.quantization}, kv_cache.dtype {settings.kv_cache.dtype}"
    )
