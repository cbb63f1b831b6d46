"""Verification: the gain over the current release, its 95% interval, and the verdict."""

from __future__ import annotations

import pytest

from reconciler.optimize.candidates import Run
from reconciler.optimize.verdict import judge
from reconciler.optimize.verify import gain_interval, gain_verdict, most_runs, promising, t975
from reconciler.spec.policy import OptimizerRules
from reconciler.spec.result import Metrics


def test_t_quantiles_shrink_towards_normal() -> None:
    assert t975(1) == pytest.approx(12.706)
    assert t975(4) == pytest.approx(2.776)
    assert t975(1000) == pytest.approx(1.96)
    assert t975(2) > t975(10) > t975(100)


def test_welch_interval_of_three_runs_each() -> None:
    gain = gain_interval([100.0, 102.0, 98.0], [120.0, 118.0, 122.0], higher_is_better=True)
    assert gain.gain == pytest.approx(0.20)
    # se = sqrt(4/3 + 4/3) = 1.633, df = 4 -> t 2.776: half width 4.53 on a mean of 100
    assert gain.low == pytest.approx(0.20 - 0.0453, abs=1e-3)
    assert gain.high == pytest.approx(0.20 + 0.0453, abs=1e-3)
    assert gain.runs == 3


def test_lower_is_better_goals_gain_by_going_down() -> None:
    gain = gain_interval([500.0, 500.0], [400.0, 400.0], higher_is_better=False)
    assert gain.gain == pytest.approx(0.20)
    assert gain.low == gain.high == pytest.approx(0.20)  # no spread: no width


def test_one_run_each_has_no_interval() -> None:
    gain = gain_interval([100.0], [110.0], higher_is_better=True)
    assert (gain.low, gain.gain, gain.high) == pytest.approx((0.1, 0.1, 0.1))


@pytest.mark.parametrize(
    ("current", "candidate", "decision", "refused"),
    [
        ([100.0, 101.0, 99.0], [120.0, 121.0, 119.0], "verified", None),
        ([100.0, 101.0, 99.0], [102.0, 103.0, 101.0], "rejected", "is not above +3.0%"),
        ([100.0, 130.0, 70.0], [110.0, 140.0, 80.0], "inconclusive", "within noise"),
    ],
    ids=["clear-win", "below-min-gain", "noisy"],
)
def test_verdict(
    current: list[float], candidate: list[float], decision: str, refused: str | None
) -> None:
    """A gain within noise is undecided (inconclusive), never a rejection."""
    said, why = gain_verdict(gain_interval(current, candidate, True), 0.03)
    assert said == decision
    assert (why is None) if refused is None else (why is not None and refused in why)
    assert most_runs(3) == 6


def test_promising_after_one_run() -> None:
    assert promising(100.0, 110.0, True, 0.03)
    assert not promising(100.0, 102.0, True, 0.03)
    assert promising(500.0, 400.0, False, 0.03)
    assert not promising(500.0, 600.0, False, 0.03)


def test_no_runs_is_an_error() -> None:
    with pytest.raises(ValueError, match="at least one run"):
        gain_interval([], [1.0], True)


def test_the_verdict_counts_only_runs_that_are_evidence() -> None:
    """A run in which the load generator fell behind never enters the gain: with it left out
    the gain is clear; with too few runs left it is inconclusive, never rejected."""

    def run(goal: float, behind: bool = False) -> Run:
        miss = "the load generator sent 30.6 of the 34.6 requests/s" if behind else None
        return Run(metrics=Metrics(), goal=goal, miss=miss, client_behind=behind)

    rules = OptimizerRules()  # repeats 3, min_gain 3%
    current = [run(100.0), run(10.0, behind=True), run(101.0), run(99.0)]
    mine = [run(120.0), run(121.0), run(5.0, behind=True), run(119.0)]
    decision, why, gain = judge(mine, current, rules, higher_is_better=True)
    assert (decision, why) == ("verified", None)
    assert gain is not None and gain.current_mean == pytest.approx(100.0) and gain.runs == 3
    few = [run(120.0), run(5.0, behind=True), run(6.0, behind=True)]
    decision, why, gain = judge(few, current, rules, higher_is_better=True)
    assert decision == "inconclusive" and gain is None
    assert why == "the load generator fell behind in 3 of 7 runs: too few runs are evidence"


def test_a_capacity_repeat_that_held_nowhere_counts_with_its_figure() -> None:
    """On a busy machine a repeat's few runs near its capacity may all miss: for a capacity
    goal it counts with its (lower) figure, as the current release's does; at the traffic's
    own rate (latency goal) a miss rejects."""

    def run(goal: float, miss: str | None = None) -> Run:
        return Run(metrics=Metrics(), goal=goal, miss=miss)

    current = [run(10.1), run(11.7), run(10.6), run(9.3)]
    mine = [run(15.5), run(16.0), run(14.0, miss="answers (23/s) fell behind arrivals"),
            run(15.8)]  # fmt: skip
    decision, _, gain = judge(mine, current, OptimizerRules(), higher_is_better=True)
    assert decision == "verified" and gain is not None and gain.low > 0
    decision, why, _ = judge(mine, current, OptimizerRules(), True, searches=False)
    assert decision == "rejected" and (why or "").startswith("misses the target in 1 of 4 runs")
