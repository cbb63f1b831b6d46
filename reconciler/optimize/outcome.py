"""Models and pure logic: a candidate's outcome on the traffic — measured by a trial or
predicted by the simulator's model — and how it reads against the goal and the latency target
(optuna's constraint convention: a value <= 0 meets the target)."""

from __future__ import annotations

from pydantic import PositiveInt

from reconciler.bench.saturation import BEHIND
from reconciler.catalog.latency import LatencyTarget, Verdict
from reconciler.engines.model.stats import Prediction
from reconciler.optimize.goal import Goal, Served, goal_value, higher_is_better, served
from reconciler.spec.base import Spec
from reconciler.spec.result import Metrics

# An outcome with errors, or lacking a figure the target needs, lies at least this far outside
# the target: constrained TPE then ranks it below every outcome that met it.
MISSED = 1.0


class Outcome(Spec):
    """A candidate's figures on the traffic."""

    metrics: Metrics
    gpus: PositiveInt  # every GPU of the deployment, prefill included
    gpu_hour: float | None = None  # the price it is costed at; None: no $/M
    simulated: bool = False  # predicted by the simulator's model, not measured
    behind: bool = False  # its answers fell behind its arrivals: it did not hold the load
    rate: float | None = None  # the arrival rate it was taken at (requests/s)
    served: Served | None = None  # goodput and output at that rate (goal.py)

    @classmethod
    def from_prediction(cls, prediction: Prediction, gpu_hour: float | None) -> Outcome:
        arrivals, answers = prediction.arrival_rps, prediction.answer_rps
        measured = prediction.requests + prediction.errors
        at = served(
            arrivals or prediction.rate or 0.0,
            measured,
            prediction.good or 0,
            prediction.output_tokens or 0,
        )
        if at is None and prediction.goodput_rps is not None:  # closed loop: over its window
            at = Served(
                rate=round(prediction.requests / max(prediction.duration_s, 1e-9), 3),
                goodput_rps=prediction.goodput_rps,
                output_tok_s=prediction.output_tok_s,
            )
        return cls(
            metrics=prediction.metrics(goodput=True),
            gpus=prediction.gpus,
            gpu_hour=gpu_hour,
            simulated=True,
            behind=bool(arrivals and answers is not None and answers < BEHIND * arrivals),
            rate=prediction.rate,
            served=at,
        )

    def value(self, goal: Goal) -> float | None:
        return goal_value(goal, self.metrics, self.gpus, self.gpu_hour, self.served)


def violation(outcome: Outcome, target: LatencyTarget | None) -> float:
    """How far outside the latency target the outcome lies: the worst value/limit ratio - 1,
    so <= 0 meets it. Errors, answers falling behind arrivals, or a figure the target needs
    but lacks, count as missed."""
    metrics = outcome.metrics
    if metrics.errors:
        return MISSED + metrics.errors / max(metrics.requests or 0, 1)
    if target is None:
        return MISSED if outcome.behind else 0.0
    judgement = target.judge(metrics)
    if judgement.verdict is Verdict.MISSING or judgement.worst_ratio is None:
        return MISSED
    if judgement.verdict is Verdict.MISSED:
        return max(judgement.worst_ratio - 1.0, 1e-9)
    return MISSED if outcome.behind else judgement.worst_ratio - 1.0


# A run stops early once its figures so far lie this far outside the target, over at least
# this many answers.
EARLY_STOP_MISS = 0.25
MIN_EARLY_REQUESTS = 10


def clearly_misses(partial: Outcome, target: LatencyTarget | None) -> bool:
    """Whether a run's figures so far clearly miss the latency target (stop it there)."""
    if target is None or (partial.metrics.requests or 0) < MIN_EARLY_REQUESTS:
        return False
    return violation(partial, target) > EARLY_STOP_MISS


def beats(goal: Goal, a: float, b: float) -> bool:
    """Whether goal figure `a` is better than `b`."""
    return a > b if higher_is_better(goal) else a < b


def within(goal: Goal, value: float, best: float, share: float) -> bool:
    """Whether `value` lies within `share` (0.03: 3%) of `best`, on the goal's side."""
    if higher_is_better(goal):
        return value >= best * (1.0 - share)
    return value <= best * (1.0 + share)
