"""Pure logic (CPU only): the pre-screen — each candidate's figures on the traffic as the
simulator's performance model predicts them (`denv sim predict`, virtual time), ranked by the
goal with the latency target as a constraint. Predictions are labelled simulated; they choose
what to trial first, and never stand in for a measurement."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from reconciler.catalog.latency import LatencyTarget
from reconciler.engines.sim.predict import predict
from reconciler.engines.sim.traffic import Request
from reconciler.errors import DenvError
from reconciler.optimize.goal import Goal, higher_is_better
from reconciler.optimize.outcome import Outcome, violation
from reconciler.optimize.space import Candidate, SearchSpace

Progress = Callable[[int, int], None]  # (done, total)

# How far over a latency limit a prediction may lie and still be worth a trial: the model's
# median errors over its calibration points are 8% (tok/s/GPU) to 15% (TTFT p50), see
# docs/simulator.md, "Errors".
MODEL_MARGIN = 0.1
# Predictions this close (relative) on the goal and the target are taken as one: the levers
# that tell them apart did not matter to the model.
ALIKE = 0.005


@dataclass(frozen=True)
class Scored:
    """A candidate's predicted outcome and how it reads against the goal and the target."""

    candidate: Candidate
    outcome: Outcome | None  # None: nothing could be predicted (see reason)
    value: float | None  # the goal's figure
    violation: float  # <= 0: meets the latency target
    reason: str | None = None  # why it misses the target, or could not be predicted

    @property
    def meets(self) -> bool:
        return self.value is not None and self.violation <= 0


def prescreen(
    space: SearchSpace,
    candidates: Sequence[Candidate],
    requests: Sequence[Request],
    target: LatencyTarget | None,
    goal: Goal,
    *,
    concurrency: int | None = None,
    rate: float | None = None,
    progress: Progress | None = None,
) -> list[Scored]:
    """Predict every candidate on `requests` — `concurrency` clients (closed loop, as the
    trials replay), else each request at its send time — and rank them: those meeting the
    target first, best goal figure first; then the rest, nearest the target first."""
    scored: list[Scored] = []
    for done, candidate in enumerate(candidates, start=1):
        scored.append(score(space, candidate, requests, target, goal, concurrency, rate))
        if progress is not None:
            progress(done, len(candidates))
    return ranked(scored, goal)


def score(
    space: SearchSpace,
    candidate: Candidate,
    requests: Sequence[Request],
    target: LatencyTarget | None,
    goal: Goal,
    concurrency: int | None = None,
    rate: float | None = None,
) -> Scored:
    """One candidate's prediction."""
    try:
        prediction = predict(
            space.recipe_of(candidate),
            space.hardware,
            space.model,
            requests,
            concurrency,
            rate=rate,
        )
    except (DenvError, ValueError) as exc:
        return Scored(candidate, None, None, float("inf"), f"not predicted: {exc}")
    outcome = Outcome.from_prediction(prediction, space.gpu_hour)
    miss = violation(outcome, target)
    reason = None
    if prediction.errors:
        reason = f"{prediction.errors} requests too large for one replica"
    elif miss > 0 and target is not None:
        reason = target.judge(outcome.metrics).reason
    return Scored(candidate, outcome, outcome.value(goal), miss, reason)


def ranked(scored: Sequence[Scored], goal: Goal) -> list[Scored]:
    sign = -1.0 if higher_is_better(goal) else 1.0

    def key(s: Scored) -> tuple[int, float, str]:
        if s.meets and s.value is not None:
            return (0, sign * s.value, s.candidate.id)
        return (1, s.violation, s.candidate.id)

    return sorted(scored, key=key)


def promising(scored: Sequence[Scored], goal: Goal, margin: float = MODEL_MARGIN) -> list[Scored]:
    """What to trial first: predictions within `margin` of the target, best goal figure first,
    one of each group of alike predictions (the first of it in `scored`'s order)."""
    near = [s for s in scored if s.value is not None and s.violation <= margin]
    sign = -1.0 if higher_is_better(goal) else 1.0
    near.sort(key=lambda s: (sign * (s.value or 0.0), s.candidate.id))
    picked: list[Scored] = []
    for s in near:
        if not any(_alike(s, p) for p in picked):
            picked.append(s)
    return picked


def _alike(a: Scored, b: Scored) -> bool:
    if a.value is None or b.value is None:
        return False
    close = abs(a.value - b.value) <= ALIKE * max(abs(a.value), abs(b.value), 1e-9)
    return close and abs(a.violation - b.violation) <= ALIKE
